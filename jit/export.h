// jit::export_graph: one whole graph for fn (an error naming the break when there is
// one), saved to a text file and loaded back to run without fn (PyTorch's torch.export).
#pragma once
#include "jit/trace.h"

namespace kiln::jit {

class ExportedProgram {
   public:
    ExportedProgram() = default;
    explicit ExportedProgram(OneGraph g) : g_(std::move(g)) {}
    // Runs the graph: `inputs` are fn's tensor arguments, in order.
    std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
    const Graph& graph() const { return *g_.graph; }
    void save(const std::string& path) const;
    static ExportedProgram load(const std::string& path);
    std::string to_text() const;
    static ExportedProgram from_text(const std::string& text);

   private:
    OneGraph g_;
};

template <class F, class... T>
ExportedProgram export_graph(F&& fn, T&&... args) {
    using Sig = typename fn_traits<std::remove_cvref_t<std::remove_pointer_t<std::decay_t<F>>>>::sig;
    std::function<Sig> f(std::forward<F>(fn));
    Args flat;
    int pos = 0;
    (flatten_arg(flat, args, ArgPath{.position = pos++}), ...);
    return ExportedProgram(record_one_graph(flat, [&] { return flatten_result(f(args...)); },
                                            {.fail_on_escape = true, .caller = "export_graph"}));
}

}  // namespace kiln::jit
