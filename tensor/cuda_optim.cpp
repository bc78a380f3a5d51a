// SGD and Adam over many CUDA parameters in one launch (tensor/cuda_optim.h). A launch takes
// up to 64 parameters by value in its argument block (pointers and sizes: no table to copy
// to the device, so a step stays asynchronous and a CUDA graph can capture it); every thread
// walks each parameter with a grid-stride loop.
#include "tensor/cuda_optim.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "tensor/cuda_runtime.h"
#include "tensor/error.h"
#include "tensor/storage.h"

namespace kiln::cuda {
namespace {

constexpr int kPerLaunch = 64;  // parameters per launch: the argument block stays under 4 KB

// The argument blocks, laid out as the kernels' structs below (8-byte fields first).
struct SgdArgs {
    long long n[kPerLaunch];  // elements of each parameter
    void* p[kPerLaunch];
    const void* g[kPerLaunch];
    void* buf[kPerLaunch];  // null: no momentum
    double lr, momentum, weight_decay;
    int count;  // parameters in this launch
};
struct AdamArgs {
    long long n[kPerLaunch];
    void* p[kPerLaunch];
    const void* g[kPerLaunch];
    void* m[kPerLaunch];           // exp_avg
    void* v[kPerLaunch];           // exp_avg_sq
    double* step[kPerLaunch];      // steps taken (float64 device memory): the bias corrections' t
    double lr, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
    int count;
};
static_assert(sizeof(AdamArgs) < 4096 && sizeof(SgdArgs) < 4096, "a kernel's arguments fit 4 KB");

std::atomic<int64_t> g_launches{0};

const char* c_type(DType d) { return d == DType::float64 ? "double" : "float"; }
const char* c_sqrt(DType d) { return d == DType::float64 ? "sqrt" : "sqrtf"; }

// The per-tensor path's arithmetic, element by element, in the parameter's dtype.
std::string sgd_source(DType dt) {
    std::ostringstream s;
    s << "typedef " << c_type(dt) << " T;\n"
      << "struct SgdArgs { long long n[" << kPerLaunch << "]; T* p[" << kPerLaunch
      << "]; const T* g[" << kPerLaunch << "]; T* buf[" << kPerLaunch
      << "]; double lr, momentum, weight_decay; int count; };\n"
      << R"(extern "C" __global__ void kiln_sgd_step(SgdArgs a) {
    const T neg_lr = (T)(-a.lr), momentum = (T)a.momentum, wd = (T)a.weight_decay;
    const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x, stride = (long long)blockDim.x * gridDim.x;
    for (int t = 0; t < a.count; ++t) {
        T* p = a.p[t];
        const T* g = a.g[t];
        T* buf = a.buf[t];
        for (long long i = first; i < a.n[t]; i += stride) {
            T d = g[i];
            if (wd != (T)0) d = d + p[i] * wd;
            if (buf) {
                d = buf[i] * momentum + d;
                buf[i] = d;
            }
            p[i] = p[i] + d * neg_lr;
        }
    }
}
)";
    return s.str();
}

std::string adam_source(DType dt) {
    std::ostringstream s;
    s << "typedef " << c_type(dt) << " T;\n#define KILN_SQRT " << c_sqrt(dt) << "\n"
      << "struct AdamArgs { long long n[" << kPerLaunch << "]; T* p[" << kPerLaunch
      << "]; const T* g[" << kPerLaunch << "]; T* m[" << kPerLaunch << "]; T* v[" << kPerLaunch
      << "]; double* step[" << kPerLaunch
      << "]; double lr, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay; int "
         "count; };\n"
      << R"(// Counts this step: one thread per parameter, before kiln_adam_step reads the counts.
extern "C" __global__ void kiln_adam_count(AdamArgs a) {
    if ((int)threadIdx.x < a.count) *a.step[threadIdx.x] += 1.0;
}
// The bias corrections from the count in device memory (PyTorch's capturable Adam), in
// double as PyTorch computes them, so a CUDA graph replays the right ones on every step.
extern "C" __global__ void kiln_adam_step(AdamArgs a) {
    const T omb1 = (T)a.one_minus_beta1, b2 = (T)a.beta2, omb2 = (T)a.one_minus_beta2, eps = (T)a.eps,
            wd = (T)a.weight_decay;
    const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x, stride = (long long)blockDim.x * gridDim.x;
    for (int t = 0; t < a.count; ++t) {
        T* p = a.p[t];
        const T* g = a.g[t];
        T* m = a.m[t];
        T* v = a.v[t];
        if (first >= a.n[t]) continue;
        const double count = *a.step[t];
        const T step_size = (T)(a.lr / (1.0 - pow(a.beta1, count))),
                bc2_sqrt = (T)sqrt(1.0 - pow(a.beta2, count));
        for (long long i = first; i < a.n[t]; i += stride) {
            T gi = g[i];
            if (wd != (T)0) gi = gi + p[i] * wd;
            T mi = m[i] + (gi - m[i]) * omb1;  // lerp toward g
            T vi = v[i] * b2 + gi * gi * omb2;
            m[i] = mi;
            v[i] = vi;
            p[i] = p[i] - mi / (KILN_SQRT(vi) / bc2_sqrt + eps) * step_size;
        }
    }
}
)";
    return s.str();
}

void* ptr(const Tensor& t) { return t.raw_data(); }
void bump_version(const Tensor& t) { ++t.impl()->storage->version; }  // an in-place write, as add_

// Runs `fill(args, first, count)` and one launch per kPerLaunch parameters of one dtype
// (after a one-block launch of `before`, when named, with the same arguments).
template <class Args, class Fill>
void launch_chunks(const std::vector<Tensor>& params, const std::string& source, const char* entry,
                   Fill&& fill, const char* before = nullptr) {
    void* fn = detail::kernel(source, entry);
    void* first_fn = before ? detail::kernel(source, before) : nullptr;
    for (size_t first = 0; first < params.size(); first += kPerLaunch) {
        int count = int(std::min<size_t>(kPerLaunch, params.size() - first));
        Args args{};
        args.count = count;
        int64_t most = 0;
        for (int t = 0; t < count; ++t) {
            args.n[t] = params[first + size_t(t)].numel();
            most = std::max<int64_t>(most, args.n[t]);
        }
        fill(args, first, count);
        void* kernel_args[] = {&args};
        if (first_fn) {
            ++g_launches;
            detail::launch_grid(first_fn, 1, kPerLaunch, 0, kernel_args);
        }
        ++g_launches;
        detail::launch(fn, most, kernel_args);
    }
}

// The parameters of `dtype`, by index.
std::vector<size_t> of_dtype(const std::vector<Tensor>& params, DType dtype) {
    std::vector<size_t> out;
    for (size_t i = 0; i < params.size(); ++i)
        if (params[i].dtype() == dtype) out.push_back(i);
    return out;
}

template <class T>
std::vector<T> pick(const std::vector<T>& all, const std::vector<size_t>& index) {
    std::vector<T> out;
    for (size_t i : index) out.push_back(all[i]);
    return out;
}

}  // namespace

bool fused_optim_enabled() {
    const char* e = std::getenv("KILN_FUSED_OPTIM");
    return !(e && std::string_view(e) == "0");
}

bool fused_optim_takes(const Tensor& p, const Tensor& grad) {
    return p.device().type == DeviceType::cuda &&
           (p.dtype() == DType::float32 || p.dtype() == DType::float64) && p.is_contiguous() &&
           p.numel() > 0 && grad.defined() && grad.device() == p.device() &&
           grad.dtype() == p.dtype() && grad.shape() == p.shape() && grad.is_contiguous();
}

void fused_sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& bufs, double lr, double momentum,
                    double weight_decay) {
    KILN_CHECK(grads.size() == params.size() && (bufs.empty() || bufs.size() == params.size()),
               "fused SGD step: ", params.size(), " parameters, ", grads.size(), " gradients, ",
               bufs.size(), " momentum buffers");
    for (DType dt : {DType::float32, DType::float64}) {
        std::vector<size_t> index = of_dtype(params, dt);
        if (index.empty()) continue;
        std::vector<Tensor> p = pick(params, index), g = pick(grads, index);
        std::vector<Tensor> b = bufs.empty() ? std::vector<Tensor>() : pick(bufs, index);
        launch_chunks<SgdArgs>(p, sgd_source(dt), "kiln_sgd_step",
                               [&](SgdArgs& a, size_t first, int count) {
                                   a.lr = lr, a.momentum = momentum, a.weight_decay = weight_decay;
                                   for (int t = 0; t < count; ++t) {
                                       size_t i = first + size_t(t);
                                       a.p[t] = ptr(p[i]);
                                       a.g[t] = ptr(g[i]);
                                       a.buf[t] = b.empty() ? nullptr : ptr(b[i]);
                                   }
                               });
        for (size_t i = 0; i < p.size(); ++i) {
            bump_version(p[i]);
            if (!b.empty()) bump_version(b[i]);
        }
    }
}

void fused_adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                     const std::vector<Tensor>& steps, const AdamHyper& h) {
    KILN_CHECK(grads.size() == params.size() && exp_avgs.size() == params.size() &&
                   exp_avg_sqs.size() == params.size() && steps.size() == params.size(),
               "fused Adam step: ", params.size(), " parameters, ", grads.size(), " gradients, ",
               exp_avgs.size(), " and ", exp_avg_sqs.size(), " moments, ", steps.size(),
               " step counts");
    for (DType dt : {DType::float32, DType::float64}) {
        std::vector<size_t> index = of_dtype(params, dt);
        if (index.empty()) continue;
        std::vector<Tensor> p = pick(params, index), g = pick(grads, index),
                            m = pick(exp_avgs, index), v = pick(exp_avg_sqs, index);
        std::vector<Tensor> t_of = pick(steps, index);
        for (const Tensor& t : t_of)
            KILN_CHECK(t.device() == p[0].device() && t.dtype() == DType::float64 && t.numel() == 1,
                       "fused Adam step: a step count must be a float64 scalar on ", p[0].device(),
                       ", got ", t.dtype(), " ", t.shape(), " on ", t.device());
        launch_chunks<AdamArgs>(
            p, adam_source(dt), "kiln_adam_step",
            [&](AdamArgs& a, size_t first, int count) {
                a.lr = h.lr, a.beta1 = h.beta1, a.one_minus_beta1 = 1 - h.beta1, a.beta2 = h.beta2,
                a.one_minus_beta2 = 1 - h.beta2, a.eps = h.eps, a.weight_decay = h.weight_decay;
                for (int t = 0; t < count; ++t) {
                    size_t i = first + size_t(t);
                    a.p[t] = ptr(p[i]);
                    a.g[t] = ptr(g[i]);
                    a.m[t] = ptr(m[i]);
                    a.v[t] = ptr(v[i]);
                    a.step[t] = static_cast<double*>(ptr(t_of[i]));
                }
            },
            "kiln_adam_count");
        for (size_t i = 0; i < p.size(); ++i) {
            bump_version(p[i]);
            bump_version(m[i]);
            bump_version(v[i]);
            bump_version(t_of[i]);
        }
    }
}

int64_t fused_optim_launches() { return g_launches.load(); }

std::vector<std::pair<std::string, std::string>> fused_optim_kernel_sources() {
    std::vector<std::pair<std::string, std::string>> out;
    for (DType dt : {DType::float32, DType::float64}) {
        out.emplace_back("kiln_sgd_step", sgd_source(dt));
        out.emplace_back("kiln_adam_step", adam_source(dt));
    }
    return out;
}

}  // namespace kiln::cuda
