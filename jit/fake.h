// Shape-only tracing (PyTorch's fake tensors, docs/jit.md "Shape-only tracing"): while the
// tracer records a new graph, and while AOT builds a joint graph, an op's output is a
// *fake* tensor: shape, strides, dtype and device, a Storage with no buffer (fake = true),
// made by the op's shape rule here instead of its kernel. Reading a fake tensor's values
// throws FakeTensorRead (Tensor::raw_data). KILN_FAKE_TRACE=0 keeps real tracing.
#pragma once
#include <span>

#include "tensor/ops.h"

namespace kiln::jit {

// KILN_FAKE_TRACE (default 1); set_fake_trace overrides it for this process (tests, A/B).
bool fake_trace_enabled();
void set_fake_trace(bool on);
struct FakeTraceScope {  // sets the switch for a scope
    bool prev;
    explicit FakeTraceScope(bool on) : prev(fake_trace_enabled()) { set_fake_trace(on); }
    ~FakeTraceScope() { set_fake_trace(prev); }
};

// KILN_FAKE_TRACE_CUDA (default 1): recordings whose tensors are on a GPU are shape-only
// too; 0 records them with real tensors (as before the fake rules' devices were checked).
bool fake_trace_cuda_enabled();
void set_fake_trace_cuda(bool on);
// Whether a recording (a new entry, a joint graph) over `tensors` is shape-only: the switch
// above, and for GPU tensors the CUDA one.
bool fake_trace_for(std::span<const Tensor> tensors);

bool is_fake(const Tensor& t);
bool any_fake(std::span<const Tensor> ts);
// A contiguous fake tensor.
Tensor fake_empty(const Shape& shape, DType dtype, Device device);
// `op` on fake (or real) inputs by its shape rule: a fake output, with autograd's history
// recorded as dispatch_eager would. Undefined when the op has no shape rule here (the
// caller falls back to real tensors). Throws the kernel's kiln::Error for bad input only
// where the rule checks it; the real run checks the rest.
Tensor fake_call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs);
// Turns an op's shape rule off (it then runs for real: the fallback), for the tests.
void set_fake_rule(OpId op, bool on);

}  // namespace kiln::jit
