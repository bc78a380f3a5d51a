// Weights reordered into a oneDNN primitive's layout, kept between calls (internal to
// tensor/kernels_conv_dnnl.cpp). A weight is found again by its storage, byte offset and the
// layout wanted; an entry is good while that storage lives and its version (bumped by every
// in-place write: SGD's p.add_, load_state_dict, copy_) is the one reordered.
#pragma once
#ifdef KILN_HAVE_DNNL
#include <dnnl.hpp>
#include <functional>

#include "tensor/tensor.h"

namespace kiln::detail {

// A weight in a primitive's layout: oneDNN's memory over `buffer`, a block of kiln's pool (so
// that it is recycled and gets the pool's huge pages), which the caller keeps until the
// primitive has run.
struct ConvWeights {
    dnnl::memory memory;
    Tensor buffer;
};

// The weights of `w` (contiguous float32) in layout `want`: from the cache, or made by
// `reorder(into)` and kept. Bounded (conv_weight_cache_limit_bytes, least recently used
// first out); safe to call from several threads. KILN_CONV_CACHE=0: always reorders.
ConvWeights conv_cached_weights(const Tensor& w, const dnnl::memory::desc& want,
                                const dnnl::engine& engine,
                                const std::function<void(dnnl::memory& into)>& reorder);
bool conv_weight_cache_enabled();  // KILN_CONV_CACHE, read on every call
inline constexpr size_t conv_weight_cache_limit_bytes = size_t(512) << 20;

}  // namespace kiln::detail
#endif
