// Assignment 6: the reference solution (not shipped to students: make assignment-release).
#include "assignments/a6/student.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "tensor/cuda_runtime.h"

namespace student {

using namespace kiln;

namespace {
std::string float_literal(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", double(float(v)));
    std::string s = buf;
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    return "(" + s + "f)";
}
}  // namespace

std::string emit_cuda_kernel(const Graph& graph, const Group& group, const std::string& name) {
    const auto& nodes = graph.nodes();
    std::map<int, std::string> var;
    for (size_t k = 0; k < group.inputs.size(); ++k)
        var[group.inputs[k]] = "a.in[" + std::to_string(k) + "][i]";
    std::ostringstream os;
    os << "namespace kiln_math {\nextern \"C\" __global__ void " << name << "(KernelArgs a) {\n"
       << "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n;\n"
       << "         i += (long long)blockDim.x * gridDim.x) {\n";
    for (int id : group.nodes) {
        const jit::Node& node = nodes[id];
        std::vector<std::string> xs;
        if (node.attrs.scalar_pos == ScalarPos::left)
            xs.push_back(float_literal(node.attrs.scalar));
        for (int a : node.args) xs.push_back(var.at(a));
        if (node.attrs.scalar_pos == ScalarPos::right)
            xs.push_back(float_literal(node.attrs.scalar));
        std::string v = "v" + std::to_string(id);
        os << "        float " << v << " = "
           << math_text(op_info(node.op).math, xs[0], xs.size() > 1 ? xs[1] : "") << ";  // "
           << node.name << "\n";
        var[id] = v;
    }
    for (size_t k = 0; k < group.outputs.size(); ++k)
        os << "        a.out[" << k << "][i] = " << var.at(group.outputs[k]) << ";\n";
    os << "    }\n}\n}  // namespace kiln_math\n";
    return os.str();
}

std::vector<Tensor> run_cuda_group(const Group& group, const std::string& source,
                                   const std::string& name, std::span<const Tensor> inputs) {
    KILN_CHECK(inputs.size() == group.inputs.size() && !inputs.empty() &&
                   group.outputs.size() <= size_t(kMaxOperands) &&
                   inputs.size() <= size_t(kMaxOperands),
               "run_cuda_group: ", inputs.size(), " inputs for a group of ", group.inputs.size(),
               " inputs and ", group.outputs.size(), " outputs (at most ", kMaxOperands, ")");
    KernelArgs args{};
    std::vector<Tensor> ins, outs;
    for (size_t k = 0; k < inputs.size(); ++k) {
        ins.push_back(inputs[k].contiguous());
        args.in[k] = static_cast<const float*>(ins.back().raw_data());
    }
    for (size_t k = 0; k < group.outputs.size(); ++k) {
        outs.push_back(empty(ins.front().shape(), float32, ins.front().device()));
        args.out[k] = static_cast<float*>(outs.back().raw_data());
    }
    args.n = ins.front().numel();
    void* fn = cuda::detail::kernel(source, name);
    void* params[] = {&args};
    cuda::detail::launch(fn, args.n, params);
    return outs;
}

std::string emit_softmax_kernel(const std::string& name) {
    std::ostringstream os;
    os << "namespace kiln_math {\n"
       << "extern \"C\" __global__ void " << name
       << "(const float* x, float* y, long long cols) {\n"
       << "    extern __shared__ float part[];\n"
       << "    const float* row = x + blockIdx.x * cols;\n"
       << "    float* out = y + blockIdx.x * cols;\n"
       << "    float m = -__int_as_float(0x7f800000);\n"
       << "    for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);\n"
       << "    part[threadIdx.x] = m;\n"
       << "    __syncthreads();\n"
       << "    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {  // a tree over the block\n"
       << "        if (threadIdx.x < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], "
          "part[threadIdx.x + s]);\n"
       << "        __syncthreads();\n"
       << "    }\n"
       << "    m = part[0];\n"
       << "    __syncthreads();\n"
       << "    float sum = 0.f;\n"
       << "    for (long long c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(row[c] - "
          "m);\n"
       << "    part[threadIdx.x] = sum;\n"
       << "    __syncthreads();\n"
       << "    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {\n"
       << "        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];\n"
       << "        __syncthreads();\n"
       << "    }\n"
       << "    sum = part[0];\n"
       << "    for (long long c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(row[c] - "
          "m) / sum;\n"
       << "}\n}  // namespace kiln_math\n";
    return os.str();
}

}  // namespace student
