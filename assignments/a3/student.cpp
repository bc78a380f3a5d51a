// Assignment 3: your code. Replace each `throw kiln::Error("TODO(task ...)")` with the
// task's body (student.h says what each function must do); `make assignment A=3` grades it.
#include "assignments/a3/student.h"

namespace student {

using namespace kiln;

SegmentRecorder::SegmentRecorder(const std::vector<Tensor>& args) { (void)args; }

Tensor SegmentRecorder::call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) {
    (void)op, (void)inputs, (void)attrs;
    throw Error("TODO(task 3.1): SegmentRecorder::call");
}

void SegmentRecorder::escape(const Tensor& t, Escape kind, const std::source_location& loc) {
    (void)t, (void)kind, (void)loc;
    throw Error("TODO(task 3.1): SegmentRecorder::escape");
}

void SegmentRecorder::assign(const Tensor& target, const Tensor& value) {
    (void)target, (void)value;
    throw Error("TODO(task 3.1): SegmentRecorder::assign");
}

void SegmentRecorder::end_segment() { throw Error("TODO(task 3.1): SegmentRecorder::end_segment"); }

Trace SegmentRecorder::finish(const Tensor& result) {
    (void)result;
    throw Error("TODO(task 3.1): SegmentRecorder::finish");
}

Trace record(const Fn& fn, const std::vector<Tensor>& args) {
    (void)fn, (void)args;
    throw Error("TODO(task 3.1): record");
}

int graft(std::unique_ptr<ProgramNode>& root, const Trace& trace, const jit::Backend& backend) {
    (void)root, (void)trace, (void)backend;
    throw Error("TODO(task 3.2): graft");
}

std::optional<Tensor> run_program(const ProgramNode& root, const std::vector<Tensor>& args) {
    (void)root, (void)args;
    throw Error("TODO(task 3.3): run_program");
}

Tensor CompiledFunction::operator()(const std::vector<Tensor>& args) {
    (void)args;
    throw Error("TODO(task 3.3): CompiledFunction::operator()");
}

}  // namespace student
