// Stage, schedule and source events of the structured compile log, and the provenance map.
#include "codegen/trace_codegen.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "jit/trace_log.h"

namespace kiln::codegen {
namespace {

using jit::trace_log::Json;
using jit::trace_log::quote;

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The identifiers of `text`, in order.
std::vector<std::string> identifiers(std::string_view text) {
    std::vector<std::string> out;
    for (size_t i = 0; i < text.size();) {
        if (!ident_char(text[i])) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < text.size() && ident_char(text[j])) ++j;
        out.emplace_back(text.substr(i, j - i));
        i = j;
    }
    return out;
}

// `token` names value `name` or one of the emitters' helpers for it (name_ptr, name_vec ...).
bool names_value(const std::string& token, const std::string& name) {
    if (token == name) return true;
    if (!token.starts_with(name + "_")) return false;
    char next = token[name.size() + 1];
    return !std::isdigit(
        static_cast<unsigned char>(next));  // cos_2_ptr names cos_2; cos_23 does not
}

// The line computes, loads or stores `name`: it is assigned (left of the first `=` that is
// not a comparison), or stored (name.store..., store_bool(name, ...)).
bool touches(const std::string& line, const std::string& name) {
    for (size_t p = line.find('='); p != std::string::npos; p = line.find('=', p + 1)) {
        bool comparison =
            (p + 1 < line.size() && line[p + 1] == '=') ||
            (p > 0 && std::string_view("=!<>").find(line[p - 1]) != std::string_view::npos);
        if (comparison) {
            ++p;
            continue;
        }
        for (const std::string& t : identifiers(std::string_view(line).substr(0, p)))
            if (names_value(t, name)) return true;
        break;
    }
    return line.find(name + ".store") != std::string::npos ||
           line.find("store_bool(" + name + ",") != std::string::npos;
}

// The line ranges (0-based, inclusive) of the functions (starting at column 0) whose names are
// `kernel` or kernel_<suffix> (kernel_0, kernel_0_body, kernel_0_rows).
std::vector<std::pair<int, int>> kernel_blocks(const std::vector<std::string>& lines,
                                               const std::string& kernel) {
    std::vector<std::pair<int, int>> out;
    int depth = 0;
    for (int i = 0; i < int(lines.size()); ++i) {
        const std::string& l = lines[size_t(i)];
        bool starts = false;
        int outer = depth;  // a function starts at column 0 (inside the namespace, too)
        if (!l.empty() && !std::isspace(static_cast<unsigned char>(l[0])) &&
            l.find('(') != std::string::npos && l.find('{') != std::string::npos &&
            !l.starts_with("//"))
            for (const std::string& t : identifiers(std::string_view(l).substr(0, l.find('('))))
                starts = starts || t == kernel ||
                         (t.starts_with(kernel + "_") &&
                          !std::isdigit(static_cast<unsigned char>(t[kernel.size() + 1])));
        int begin = i;
        for (char c : l) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
        if (!starts) continue;
        while (depth > outer && i + 1 < int(lines.size())) {
            ++i;
            for (char c : lines[size_t(i)]) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
        }
        out.push_back({begin, i});
    }
    return out;
}

}  // namespace

std::vector<Provenance> provenance(const Schedule& s, const std::string& source) {
    std::vector<std::string> lines = split_lines(source);
    std::vector<Provenance> out;
    for (size_t k = 0; k < s.kernels.size(); ++k) {
        const Kernel& kernel = s.kernels[k];
        if (kernel.kind != KernelKind::pointwise && kernel.kind != KernelKind::row) continue;
        std::string name = s.kernel_name(int(k));
        std::vector<std::pair<int, int>> blocks = kernel_blocks(lines, name);
        std::vector<int> values;
        for (int b : kernel.loads)
            if (s.values.count(b) && s.values.at(b).home == Home::input) values.push_back(b);
        for (int n : kernel.nodes) values.push_back(s.graph.nodes[size_t(n)].out.id);
        for (int v : values) {
            Provenance p{.node = v, .kernel = name};
            std::string vname = s.value_name(v);
            for (auto [first, last] : blocks)
                for (int i = first; i <= last; ++i) {
                    if (!touches(lines[size_t(i)], vname)) continue;
                    if (!p.lines.empty() && p.lines.back().second == i)
                        p.lines.back().second = i + 1;  // 1-based
                    else
                        p.lines.push_back({i + 1, i + 1});
                }
            if (!p.lines.empty()) out.push_back(std::move(p));
        }
    }
    return out;
}

void trace_stage(uint64_t uid, int id, const std::string& stage, double ms,
                 const std::string& text) {
    // "0_lowered" -> "lower" ...: the pipeline's stage names (DESIGN.md §8)
    static const std::pair<const char*, const char*> names[] = {
        {"0_lowered", "lower"},     {"1_conv_fused", "fuse_conv"},
        {"2_schedule", "schedule"}, {"3_epilogues", "fuse_epilogues"},
        {"4_emit", "emit"},         {"5_build", "build"}};
    std::string name = stage;
    for (auto [file, pass] : names)
        if (stage == file) name = pass;
    Json j;
    j.num("graph", uid)
        .num("backend_graph", id)
        .str("stage", name)
        .str("file_stage", stage)
        .num("ms", ms)
        .str("text", text);
    jit::trace_log::emit("stage", j);
}

namespace {

std::string dims_text(const Shape& d, size_t from, size_t to) {
    std::string out = "[";
    for (size_t i = from; i < to; ++i)
        out += (i > from ? ", " : "") +
               (is_symbol(d[i]) ? "s" + std::to_string(symbol_index(d[i])) : std::to_string(d[i]));
    return out + "]";
}

// "pointwise [16, 8]", "row [16] x [8]" (rows, then the reduced dims), as Schedule::print says it.
std::string loop_text(const Kernel& k) {
    std::string kind = kernel_kind_name(k.kind);
    if (k.kind != KernelKind::row) return kind + " " + dims_text(k.domain, 0, k.domain.size());
    size_t rows = size_t(k.outer_dims);
    return kind + " " + dims_text(k.domain, 0, rows) + " x " +
           dims_text(k.domain, rows, k.domain.size());
}

// Why a value computed by kernel `a` reaches kernel `b` through memory rather than inside one
// loop, read off the two kernels (the scheduler keeps no reasons of its own).
std::string why_apart(const Schedule& s, int a, int b) {
    const Kernel &ka = s.kernels[size_t(a)], &kb = s.kernels[size_t(b)];
    if (ka.kind == KernelKind::fallback) return "its producer runs its eager kernel: " + ka.why;
    if (kb.kind == KernelKind::fallback) return "its reader runs its eager kernel: " + kb.why;
    if (ka.kind == KernelKind::blas || kb.kind == KernelKind::blas)
        return "a matmul is a library call (BLAS), not a loop";
    if (ka.kind != kb.kind || ka.domain != kb.domain || ka.outer_dims != kb.outer_dims)
        return "different loops: " + loop_text(ka) + " and " + loop_text(kb);
    return "the scheduler started a new kernel (same loop)";
}

// Producer -> reader edges between kernels, once per (value, reading kernel); a blas kernel's
// fused epilogue reads its output in the same step and is not listed.
std::vector<std::string> cross_kernel_edges(const Schedule& s) {
    std::vector<std::string> out;
    std::set<std::pair<int, int>> seen;
    for (size_t k = 0; k < s.kernels.size(); ++k)
        for (int n : s.kernels[k].nodes) {
            const LNode& node = s.graph.nodes[size_t(n)];
            for (int v : node.inputs) {
                auto info = s.values.find(v);
                if (info == s.values.end() || !s.producer.count(v)) continue;  // a graph input
                int a = info->second.kernel;
                if (a < 0 || a == int(k) || s.kernels[k].epilogue_of == a ||
                    !seen.insert({v, int(k)}).second)
                    continue;
                Json j;
                j.str("a", jit::trace_log::node_id(v))
                    .str("b", jit::trace_log::node_id(node.out.id));
                j.str("a_kernel", s.kernel_name(a))
                    .str("b_kernel", s.kernel_name(int(k)))
                    .str("why", why_apart(s, a, int(k)));
                out.push_back(j.text());
            }
        }
    return out;
}

}  // namespace

void trace_schedule(uint64_t uid, int id, const Schedule& s,
                    const std::vector<std::string>& conv_notes) {
    auto ids = [&](const std::vector<int>& values) {
        std::vector<std::string> out;
        for (int v : values) out.push_back(quote(jit::trace_log::node_id(v)));
        return jit::trace_log::array(out);
    };
    std::vector<std::string> kernels, not_fused = cross_kernel_edges(s);
    for (size_t k = 0; k < s.kernels.size(); ++k) {
        const Kernel& kernel = s.kernels[k];
        std::vector<int> nodes;
        for (int n : kernel.nodes) nodes.push_back(s.graph.nodes[size_t(n)].out.id);
        Json j;
        j.str("name", s.kernel_name(int(k)))
            .str("kind", kernel_kind_name(kernel.kind))
            .raw("nodes", ids(nodes));
        j.raw("loads", ids(kernel.loads)).raw("stores", ids(kernel.stores));
        std::vector<std::string> domain;
        for (int64_t d : kernel.domain)
            domain.push_back(is_symbol(d) ? quote("s" + std::to_string(symbol_index(d)))
                                          : std::to_string(d));
        j.raw("domain", jit::trace_log::array(domain));
        if (kernel.epilogue_of >= 0) j.str("epilogue_of", s.kernel_name(kernel.epilogue_of));
        if (!kernel.why.empty()) j.str("why", kernel.why);
        kernels.push_back(j.text());
        if (kernel.kind == KernelKind::fallback)
            not_fused.push_back(Json()
                                    .str("node", jit::trace_log::node_id(nodes.at(0)))
                                    .str("why", kernel.why)
                                    .text());
    }
    for (const std::string& note : conv_notes)
        if (note.find(": not fused") != std::string::npos)
            not_fused.push_back(Json().str("why", "conv epilogue " + note).text());
    Json j;
    j.num("graph", uid).num("backend_graph", id).raw("kernels", jit::trace_log::array(kernels));
    j.raw("not_fused", jit::trace_log::array(not_fused))
        .raw("conv_fusions", jit::trace_log::string_array(conv_notes));
    j.str("text", s.print());
    jit::trace_log::emit("schedule", j);
}

void trace_source(uint64_t uid, int id, const Schedule& s, const std::string& source, bool cuda) {
    std::vector<std::string> map;
    for (const Provenance& p : provenance(s, source)) {
        std::vector<std::string> ranges;
        for (auto [a, b] : p.lines)
            ranges.push_back("[" + std::to_string(a) + "," + std::to_string(b) + "]");
        map.push_back(Json()
                          .str("node", jit::trace_log::node_id(p.node))
                          .str("kernel", p.kernel)
                          .raw("lines", jit::trace_log::array(ranges))
                          .text());
    }
    Json j;
    j.num("graph", uid).num("backend_graph", id).str("target", cuda ? "cuda" : "cpp");
    j.str("file", "output_code_" + std::to_string(id) + (cuda ? ".cu" : ".cpp"))
        .str("text", source);
    j.raw("provenance", jit::trace_log::array(map));
    jit::trace_log::emit("source", j);
}

}  // namespace kiln::codegen
