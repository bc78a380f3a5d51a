// The CUDA side of the window and indexing ops (kernels_conv.cpp, kernels_index.cpp): those
// files check the arguments and work out the sizes once for both devices, then call here
// to launch. One thread per output element; fold2d sums a pixel's window entries in a
// fixed order (no atomics, so it repeats exactly); scatter_add adds with atomics, so float
// sums may round differently from run to run, as PyTorch's CUDA scatter_add does. The
// kernels' sources are the CUDA dialect's first rung (codegen/emit_eager_cuda.h), which
// kernels_cuda.cpp hands out as cuda_index_kernel_sources().
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "autograd/node.h"
#include "tensor/cuda_runtime.h"
#include "tensor/kernels.h"

namespace kiln {
namespace {

using cuda::detail::kernel;
using cuda::detail::launch;

void* data(const Tensor& t) { return t.numel() ? t.raw_data() : nullptr; }

// kh kw sh sw ph pw dh dw and the image and column sizes, passed by value: laid out as the
// kernels' struct WindowArgs (codegen/emit_eager_cuda.h).
struct WindowArgs {
    long long kh, kw, sh, sw, ph, pw, dh, dw, C, H, W, OH, OW;
};
// The source of the kernel `label` names ("gather float32"), from
// cuda_index_kernel_sources() (made once).
const std::string& source(const std::string& label) {
    static const auto* sources = [] {
        auto* m = new std::map<std::string, std::string>;  // leaked, as the other caches
        for (auto& [name, text] : cuda_index_kernel_sources()) m->emplace(name, std::move(text));
        return m;
    }();
    auto it = sources->find(label);
    KILN_CHECK(it != sources->end(), "CUDA window and index kernels: none named ", label);
    return it->second;
}

WindowArgs window_args(const Shape& window, int64_t C, int64_t H, int64_t W, int64_t OH,
                       int64_t OW) {
    return {window[0], window[1], window[2], window[3], window[4], window[5], window[6],
            window[7], C,         H,         W,         OH,        OW};
}

constexpr double kNoBadIndex = -9223372036854775807.0 - 1.0;  // INT64_MIN: the flag's "none"

std::string out_of_bounds(const std::string& op, int64_t index, int64_t dim, int64_t size) {
    std::ostringstream o;
    o << op << ": index " << index << " is out of bounds for dim " << dim << " with size " << size
      << kIndexUsers;
    return o.str();
}

// Index kernels write the first index out of range they meet into a flag. Reading it at once
// would make the host wait for the GPU after every gather (an embedding, a class loss: a
// dozen waits in a GPT step, each draining the stream). So, as PyTorch's device-side checks
// do, the flag is read later: each unchecked kernel takes a slot of one device array, and
// after the host's next wait for the stream (a read of a CUDA tensor's values, synchronize())
// every slot comes back in one copy; a bad index raises there, naming its op, index and size.
// Unlike PyTorch's device assert, the GPU stays usable. With KILN_CUDA_INDEX_CHECKS=sync the
// flag is read at once (the error at the op that made it). Inside a CUDA graph capture the
// flags live in an array of the graph's own, which the graph refills before its first index
// kernel; after each replay, the next host wait reads them (a bad index of the latest
// replay raises there).
class DeferredIndexChecks {
   public:
    static constexpr int64_t kSlots = 1024;
    static DeferredIndexChecks& get() {
        static auto* checks = new DeferredIndexChecks;  // leaked: used until exit
        return *checks;
    }
    struct Pending {  // what one used slot checks
        std::string op;
        int64_t dim, size;
    };
    // A flag in the slot array for `op`'s kernel (a full array is checked first).
    void* take(Pending what, Device device) {
        std::unique_lock lock(mu_);
        if (int64_t(pending_.size()) == kSlots) {
            lock.unlock();
            cuda::detail::synchronize();  // runs check_all
            lock.lock();
        }
        NoDispatchHook raw;  // the checks' own tensors: nothing a recording should see
        autograd::NoGradGuard no_grad;
        if (!slots_.defined())
            slots_ = full({kSlots}, kNoBadIndex, {.dtype = DType::int64, .device = device});
        pending_.push_back(std::move(what));
        return static_cast<int64_t*>(slots_.raw_data()) + (pending_.size() - 1);
    }
    // Inside a capture: a flag in the captured graph's array (made, and refilled by a captured
    // fill, at its first index kernel); each replay queues the array for the next host wait.
    void* take_in_capture(Pending what, Device device) {
        std::lock_guard lock(mu_);
        uint64_t id = cuda::detail::capture_id();
        if (!captured_ || captured_->capture != id) {
            NoDispatchHook raw;
            autograd::NoGradGuard no_grad;
            captured_ = std::make_shared<Captured>();
            captured_->capture = id;
            captured_->slots =
                full({kSlots}, kNoBadIndex, {.dtype = DType::int64, .device = device});
            cuda::detail::on_each_replay(captured_.get(), [c = captured_] { get().replayed(c); });
        }
        KILN_CHECK(int64_t(captured_->pending.size()) < kSlots, "CUDA graph capture: more than ",
                   kSlots, " index kernels with range checks in one graph (", what.op, ")");
        captured_->pending.push_back(std::move(what));
        return static_cast<int64_t*>(captured_->slots.raw_data()) + (captured_->pending.size() - 1);
    }
    // After a host wait: the flags of the graphs replayed since the last wait, then those of
    // every pending kernel, one copy; refilled for reuse.
    static void check_all() {
        DeferredIndexChecks& c = get();
        check_replayed(c);
        std::vector<Pending> pending;
        std::vector<int64_t> flags;
        {
            NoDispatchHook raw;
            autograd::NoGradGuard no_grad;
            std::lock_guard lock(c.mu_);
            if (c.pending_.empty()) return;
            pending.swap(c.pending_);
            Tensor used = c.slots_.narrow(0, 0, int64_t(pending.size()));
            flags = used.to(kiln::cpu).to_vector<int64_t>();
            used.fill_(kNoBadIndex);
        }
        for (size_t i = 0; i < pending.size(); ++i)
            KILN_CHECK(flags[i] == std::numeric_limits<int64_t>::min(),
                       out_of_bounds(pending[i].op, flags[i], pending[i].dim, pending[i].size),
                       " (found at the first host wait after it: index kernels run "
                       "asynchronously; KILN_CUDA_INDEX_CHECKS=sync raises at the op)");
    }

   private:
    struct Captured {  // one captured graph's flags
        uint64_t capture = 0;
        Tensor slots;
        std::vector<Pending> pending;
    };
    void replayed(const std::shared_ptr<Captured>& c) {
        std::lock_guard lock(mu_);
        for (const auto& r : replayed_)
            if (r == c) return;
        replayed_.push_back(c);
    }
    static void check_replayed(DeferredIndexChecks& c) {
        std::vector<std::shared_ptr<Captured>> replayed;
        {
            std::lock_guard lock(c.mu_);
            replayed.swap(c.replayed_);
        }
        for (const auto& g : replayed) {
            std::vector<int64_t> flags;
            {
                NoDispatchHook raw;
                autograd::NoGradGuard no_grad;
                flags = g->slots.narrow(0, 0, int64_t(g->pending.size()))
                            .to(kiln::cpu)
                            .to_vector<int64_t>();
            }
            for (size_t i = 0; i < g->pending.size(); ++i)
                KILN_CHECK(flags[i] == std::numeric_limits<int64_t>::min(),
                           out_of_bounds(g->pending[i].op, flags[i], g->pending[i].dim,
                                         g->pending[i].size),
                           " (found at the first host wait after a replay of the CUDA graph that "
                           "captured it)");
        }
    }
    DeferredIndexChecks() { cuda::detail::set_after_host_wait(&DeferredIndexChecks::check_all); }
    std::mutex mu_;
    Tensor slots_;
    std::vector<Pending> pending_;
    std::shared_ptr<Captured> captured_;               // of the capture under way (or the last)
    std::vector<std::shared_ptr<Captured>> replayed_;  // replayed since the last host wait
};

bool check_at_once() {
    const char* e = std::getenv("KILN_CUDA_INDEX_CHECKS");
    return e && std::strcmp(e, "sync") == 0;
}

// Runs an index kernel; an index out of range raises naming it, as on the CPU: at once
// with KILN_CUDA_INDEX_CHECKS=sync, else after the next host wait (inside a capture: after a
// replay).
void run_index(DType t, bool scatter, const IndexSizes& p, const Tensor& index, const Tensor& src,
               const Tensor& out, const char* op) {
    int64_t n = index.numel();
    if (n == 0) return;
    // An index kiln made in range itself needs no check: no flag, no copy to the host (so
    // max_pool2d's gather runs inside a captured CUDA graph and never waits for the device).
    bool at_once = !p.in_range && check_at_once();
    Tensor bad = at_once ? full({1}, kNoBadIndex, {.dtype = DType::int64, .device = index.device()})
                         : Tensor();
    void* fn = kernel(source(std::string(scatter ? "scatter_add " : "gather ") + dtype_name(t)),
                      scatter ? "kiln_scatter_add" : "kiln_gather");
    long long count = n, n_index = p.n_index, n_data = p.n_data, inner = p.inner;
    void *ip = data(index), *sp = data(src), *op_ = data(out), *bp = nullptr;
    // The op that asked for the gather, if one did (IndexCheckCaller: embedding, a loss); named
    // only for a check, not on every launch.
    auto who = [op] {
        const char* caller = ::kiln::detail::index_check_caller;
        return caller ? std::string(caller) + " (" + op + ")" : std::string(op);
    };
    if (at_once) bp = data(bad);
    else if (!p.in_range && cuda::detail::capturing())
        bp = DeferredIndexChecks::get().take_in_capture({who(), p.dim, p.n_data}, index.device());
    else if (!p.in_range)
        bp = DeferredIndexChecks::get().take({who(), p.dim, p.n_data}, index.device());
    void* args[] = {&count, &n_index, &n_data, &inner, &ip, &sp, &op_, &bp};
    launch(fn, n, args);
    if (!at_once) return;
    int64_t first_bad = bad.cpu().item<int64_t>();
    KILN_CHECK(first_bad == std::numeric_limits<int64_t>::min(),
               out_of_bounds(who(), first_bad, p.dim, p.n_data));
}

}  // namespace

namespace {

// Launches the window kernel `name` ("unfold2d", "fold2d", "max_pool2d_index"; the source for
// src's dtype), one thread per element of out, over the window and the image's sizes; `pad`
// only for unfold2d. Returns out.
Tensor run_window(const char* name, const Tensor& src, Tensor out, const Shape& window, int64_t C,
                  int64_t H, int64_t W, int64_t OH, int64_t OW, double* pad = nullptr) {
    int64_t n = out.numel();
    if (n == 0) return out;
    WindowArgs a = window_args(window, C, H, W, OH, OW);
    long long count = n;
    void *sp = data(src), *op = data(out);
    void* args[] = {&a, &count, &sp, &op, pad};
    std::string label = std::string(name) + " " + dtype_name(src.dtype());
    launch(kernel(source(label), std::string("kiln_") + name), n, args);
    return out;
}

}  // namespace

Tensor cuda_unfold2d(const Tensor& x, const Shape& window, int64_t OH, int64_t OW, double pad) {
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    Tensor src = contiguous_as(x, x.dtype());
    return run_window("unfold2d", src,
                      empty({N, C * window[0] * window[1], OH * OW}, x.dtype(), x.device()), window,
                      C, H, W, OH, OW, &pad);
}

Tensor cuda_max_pool2d_index(const Tensor& x, const Shape& window, int64_t OH, int64_t OW) {
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    Tensor src = contiguous_as(x, x.dtype());
    return run_window("max_pool2d_index", src, empty({N, C, OH, OW}, DType::int64, x.device()),
                      window, C, H, W, OH, OW);
}

Tensor cuda_fold2d(const Tensor& cols, const Shape& window, int64_t C, int64_t H, int64_t W,
                   int64_t OH, int64_t OW) {
    Tensor src = contiguous_as(cols, cols.dtype());
    return run_window("fold2d", src, empty({cols.size(0), C, H, W}, cols.dtype(), cols.device()),
                      window, C, H, W, OH, OW);
}

Tensor cuda_gather(const Tensor& x, const Tensor& index, const IndexSizes& p) {
    Tensor src = contiguous_as(x, x.dtype());
    Tensor idx = contiguous_as(index, DType::int64);
    Tensor out = empty(index.shape(), x.dtype(), x.device());
    run_index(x.dtype(), false, p, idx, src, out, "gather");
    return out;
}

Tensor cuda_scatter_add(const Tensor& base, const Tensor& index, const Tensor& src_in,
                        const IndexSizes& p) {
    KILN_CHECK(base.dtype() != DType::boolean,
               "scatter_add: bool tensors are not supported on CUDA");
    Tensor out = materialize(base);
    Tensor src = contiguous_as(src_in, src_in.dtype());
    Tensor idx = contiguous_as(index, DType::int64);
    run_index(base.dtype(), true, p, idx, src, out, "scatter_add");
    return out;
}

}  // namespace kiln
