// Segments: the pieces of an entry's program tree (jit/program.h), cut at graph breaks.
// jit/segments.cpp closes the tracer's open graph into one (Tracer::end_record); replay
// (jit/tracer_replay.cpp) runs a recorded one with adopt.
#pragma once
#include <span>
#include <vector>

#include "jit/program.h"

namespace kiln::jit::tracing {

// Per output of `seg`: whether it is a view of an input (the eager tensor stays as is).
std::vector<bool> input_views(const Entry& e, const Segment& seg);

// The segment's compiled code runs, and the tensors user code holds take on its
// results (storage and autograd history): what the host sees is the compiled result.
// A write-back output is copied into the mutated tensor's own storage instead.
// An output that is a view of an input keeps the eager view user code holds (its values
// are the input's, written by the eager in-place ops): `views`.
void adopt(const Segment& seg, std::span<const Tensor> inputs, const std::vector<Tensor>& live,
           const std::vector<bool>& views);

}  // namespace kiln::jit::tracing
