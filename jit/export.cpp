// The text format of an exported graph: one line per node, constants' values inline,
// doubles as hexfloat so a round trip is exact.
//
//   kiln-graph 1
//   placeholder <name> arg <ordinal> <dtype> <rank> <sizes...>
//   placeholder <name> constant <dtype> <rank> <sizes...> <values...>
//   call <name> <op> <grad> <nargs> <args...> <dtype> <rank> <sizes...> | <attrs>
//   detach <name> <arg> <dtype> <rank> <sizes...>
//   output <n> <ids...>
#include "jit/export.h"

#include <fstream>
#include <sstream>

#include "tensor/kernels.h"

namespace kiln::jit {
namespace {

DType dtype_by_name(const std::string& s) {
    for (DType t : {DType::float32, DType::float64, DType::int64, DType::boolean})
        if (s == dtype_name(t)) return t;
    fail("export: unknown dtype '", s, "'");
}

void write_shape(std::ostream& os, const Shape& s) {
    os << s.size();
    for (int64_t d : s) os << " " << d;
}
Shape read_shape(std::istream& is) {
    size_t n = 0;
    is >> n;
    Shape s(n);
    for (auto& d : s) is >> d;
    return s;
}
void write_meta(std::ostream& os, const ValueMeta& m) {
    os << " " << m.dtype << " ";
    write_shape(os, m.shape);
}
ValueMeta read_meta(std::istream& is) {
    std::string dt;
    is >> dt;
    ValueMeta m;
    m.dtype = dtype_by_name(dt);
    m.shape = read_shape(is);
    m.sym.assign(m.shape.size(), -1);
    return m;
}
double read_double(std::istream& is) {
    std::string s;
    is >> s;
    return std::strtod(s.c_str(), nullptr);  // reads hexfloat
}

void write_attrs(std::ostream& os, const Attrs& a) {
    write_shape(os, a.shape);
    os << " ";
    write_shape(os, a.dims);
    os << " " << a.dim << " " << a.start << " " << a.end << " " << a.step << std::hexfloat << " " << a.scalar << " " << a.lo
       << " " << a.hi << std::defaultfloat << " " << int(a.scalar_pos) << " " << a.keepdim << " " << a.dtype;
}
Attrs read_attrs(std::istream& is) {
    Attrs a;
    a.shape = read_shape(is);
    a.dims = read_shape(is);
    is >> a.dim >> a.start >> a.end >> a.step;
    a.scalar = read_double(is);
    a.lo = read_double(is);
    a.hi = read_double(is);
    int pos = 0;
    std::string dt;
    is >> pos >> a.keepdim >> dt;
    a.scalar_pos = ScalarPos(pos);
    a.dtype = dtype_by_name(dt);
    return a;
}

}  // namespace

std::vector<Tensor> ExportedProgram::run(const std::vector<Tensor>& inputs) const {
    Args args;
    for (const Tensor& t : inputs) args.push_back({.kind = ArgKind::tensor, .tensor = t});
    return run_one_graph(g_, args);
}

std::string ExportedProgram::to_text() const {
    std::ostringstream os;
    os << "kiln-graph 1\n";
    const auto& nodes = g_.graph->nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
        const Node& n = nodes[i];
        // The text format has no devices yet: a graph that touches a GPU would load as a CPU one.
        KILN_CHECK(n.kind == NodeKind::output || (n.meta.device == cpu && n.attrs.device == cpu && n.attrs.from == cpu),
                   "export: node ", n.name, " is on ", n.meta.device, "; saving graphs that use a GPU is not supported yet");
        if (n.kind == NodeKind::placeholder) {
            bool is_arg = g_.input_args[i] >= 0;
            os << "placeholder " << n.name << (is_arg ? " arg " + std::to_string(g_.input_args[i]) : " constant");
            write_meta(os, n.meta);
            if (!is_arg && n.meta.dtype == DType::int64)  // exact: int64 beyond 2^53 is not a double
                for (int64_t v : contiguous_as(g_.constants[i].detach(), int64).to_vector<int64_t>()) os << " " << std::dec << v;
            else if (!is_arg)
                for (double v : contiguous_as(g_.constants[i].detach(), float64).to_vector<double>()) os << " " << std::hexfloat << v;
        } else if (n.kind == NodeKind::call) {
            os << "call " << n.name << " " << op_info(n.op).name << " " << n.grad_enabled << " " << n.args.size();
            for (int a : n.args) os << " " << a;
            write_meta(os, n.meta);
            os << " | ";
            write_attrs(os, n.attrs);
        } else if (n.kind == NodeKind::detach) {
            os << "detach " << n.name << " " << n.args[0];
            write_meta(os, n.meta);
        } else {
            os << "output " << n.args.size();
            for (int a : n.args) os << " " << a;
        }
        os << std::defaultfloat << "\n";
    }
    return os.str();
}

ExportedProgram ExportedProgram::from_text(const std::string& text) {
    std::istringstream in(text);
    std::string line, kind, name;
    std::getline(in, line);
    KILN_CHECK(line == "kiln-graph 1", "export: not a kiln graph file (first line '", line, "')");
    GraphBuilder b;
    OneGraph g;
    std::vector<int> outputs;
    while (std::getline(in, line)) {
        std::istringstream is(line);
        is >> kind;
        if (kind == "placeholder") {
            std::string src;
            int ordinal = -1;
            is >> name >> src;
            if (src == "arg") is >> ordinal;
            ValueMeta m = read_meta(is);
            Tensor constant;
            if (src == "constant" && m.dtype == DType::int64) {
                std::vector<int64_t> vals(size_t(shape_numel(m.shape)));
                for (int64_t& v : vals) KILN_CHECK(is >> std::dec >> v, "load_graph: bad int64 constant in ", name);
                constant = tensor(vals, m.shape);
            } else if (src == "constant") {
                std::vector<double> vals(size_t(shape_numel(m.shape)));
                for (double& v : vals) v = read_double(is);
                constant = contiguous_as(tensor(vals, m.shape), m.dtype);
            }
            b.placeholder(name, m, src);
            g.input_args.push_back(ordinal);
            g.constants.push_back(constant);
        } else if (kind == "call") {
            std::string op, bar;
            bool grad = true;
            size_t nargs = 0;
            is >> name >> op >> grad >> nargs;
            std::vector<int> args(nargs);
            for (int& a : args) is >> a;
            ValueMeta m = read_meta(is);
            is >> bar;
            b.call(op_by_name(op), read_attrs(is), args, m, grad);
        } else if (kind == "detach") {
            int arg = 0;
            is >> name >> arg;
            b.detach(arg, read_meta(is));
        } else if (kind == "output") {
            size_t n = 0;
            is >> n;
            outputs.resize(n);
            for (int& a : outputs) is >> a;
        }
        KILN_CHECK(!is.fail(), "export: malformed line: ", line);
    }
    g.graph = b.build(outputs);
    return ExportedProgram(std::move(g));
}

void ExportedProgram::save(const std::string& path) const {
    std::ofstream out(path);
    KILN_CHECK(out, "export: cannot write ", path);
    out << to_text();
}

ExportedProgram ExportedProgram::load(const std::string& path) {
    std::ifstream in(path);
    KILN_CHECK(in, "export: cannot read ", path);
    std::stringstream ss;
    ss << in.rdbuf();
    return from_text(ss.str());
}

}  // namespace kiln::jit
