// kiln::cuda — what a user sees of the GPU: whether there is one, and its memory pool.
//
// Nothing here links against CUDA. The driver API (libcuda.so.1), NVRTC and cuBLAS are
// opened with dlopen on first use (tensor/cuda_runtime.cpp), so every kiln binary starts on
// machines without a GPU, a driver or the toolkit; there, is_available() is false and any
// CUDA call raises a kiln::Error that names what is missing.
#pragma once
#include <cstddef>
#include <string>
#include <utility>

#include "tensor/tensor.h"

namespace kiln::cuda {

bool is_available();
// Why is_available() is false ("libcuda.so.1 not found: ..."); empty when it is true.
std::string unavailable_reason();
int device_count();
// "NVIDIA H100 80GB HBM3, sm_90" for `cuda:index`.
std::string device_name(int index = 0);

// (major, minor) compute capability of `cuda:index`, e.g. (9, 0) for an H100.
std::pair<int, int> device_capability(int index = 0);

// Kernels and copies run in order on one stream per device; item(), printing and copies to
// the host wait for it. synchronize() waits explicitly (timing, benchmarks).
void synchronize();

// The caching allocator (size classes, like the CPU pool): bytes held by live tensors, bytes
// held for reuse, and giving the cached blocks back to the driver.
size_t memory_allocated();
size_t memory_cached();
void empty_cache();

// A CUDA event on kiln's stream, for timing GPU work as the GPU saw it (benchmarks):
//   cuda::Event start, end; start.record(); work(); end.record(); start.elapsed_ms(end)
class Event {
   public:
    Event();
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    void record();
    float elapsed_ms(const Event& end) const;  // waits for `end`

   private:
    void* event_ = nullptr;
};

// A tensor's copy on `device` (the tensor itself when already there). Tensor::to(Device).
Tensor to_device(const Tensor& x, Device device);

}  // namespace kiln::cuda
