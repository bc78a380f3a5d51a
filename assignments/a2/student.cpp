// Assignment 2: your code. Replace each `throw kiln::Error("TODO(task ...)")` with the
// task's body (student.h says what each function must do); `make assignment A=2` grades it.
#include "assignments/a2/student.h"

namespace student {

using namespace kiln;

Recorder::Recorder(const std::vector<Tensor>& inputs) { (void)inputs; }

Tensor Recorder::call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) {
    (void)op, (void)inputs, (void)attrs;
    throw Error("TODO(task 2.1): Recorder::call");
}

void Recorder::escape(const Tensor& t, Escape kind, const std::source_location& loc) {
    (void)t, (void)kind, (void)loc;
    throw Error("TODO(task 2.1): Recorder::escape");
}

void Recorder::assign(const Tensor& target, const Tensor& value) {
    (void)target, (void)value;
    throw Error("TODO(task 2.1): Recorder::assign");
}

std::shared_ptr<const Graph> Recorder::finish(const Tensor& output) {
    (void)output;
    throw Error("TODO(task 2.1): Recorder::finish");
}

std::shared_ptr<const Graph> trace(const Fn& fn, const std::vector<Tensor>& tensors,
                                   const std::vector<double>& scalars) {
    (void)fn, (void)tensors, (void)scalars;
    throw Error("TODO(task 2.1): trace");
}

Guard guard_build(const std::vector<Tensor>& tensors, const std::vector<double>& scalars) {
    (void)tensors, (void)scalars;
    throw Error("TODO(task 2.2): guard_build");
}

std::string guard_check(const Guard& guard, const std::vector<Tensor>& tensors,
                        const std::vector<double>& scalars) {
    (void)guard, (void)tensors, (void)scalars;
    throw Error("TODO(task 2.2): guard_check");
}

Tensor CompiledFunction::operator()(const std::vector<Tensor>& tensors,
                                    const std::vector<double>& scalars) {
    (void)tensors, (void)scalars;
    throw Error("TODO(task 2.3): CompiledFunction::operator()");
}

}  // namespace student
