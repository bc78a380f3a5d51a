// kiln::Error: every user-facing failure, with the op and the values involved.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kiln {

class Error : public std::runtime_error {
   public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// An index out of range where PyTorch raises IndexError (embedding, a class loss's target);
// kiln script raises it as IndexError. Still a kiln::Error to anyone catching those.
class IndexError : public Error {
   public:
    using Error::Error;
};

// A read of a fake tensor's values (shape-only tracing, jit/fake.h): it has none. The
// tracer catches it and records with real tensors instead.
class FakeTensorRead : public Error {
   public:
    using Error::Error;
};

// Names the op on whose behalf index kernels run (embedding, cross_entropy) while it lives,
// for a range error found after the op returned: a CUDA gather's check is read at the next
// host wait (tensor/kernels_cuda_index.cpp), so its message names the caller as well as the
// gather. One per thread; nests.
namespace detail {
inline thread_local const char* index_check_caller = nullptr;
}
class IndexCheckCaller {
   public:
    explicit IndexCheckCaller(const char* op)
        : previous_(std::exchange(detail::index_check_caller, op)) {}
    ~IndexCheckCaller() { detail::index_check_caller = previous_; }
    IndexCheckCaller(const IndexCheckCaller&) = delete;
    IndexCheckCaller& operator=(const IndexCheckCaller&) = delete;

   private:
    const char* previous_;
};

// Builds a message from streamable parts: KILN_CHECK(cond, "matmul: ", a.shape(), " vs ", ...).
template <class E = Error, class... Parts>
[[noreturn]] void fail_as(const Parts&... parts) {
    std::ostringstream os;
    (os << ... << parts);
    throw E(os.str());
}
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
    fail_as<Error>(parts...);
}

}  // namespace kiln

#define KILN_CHECK(cond, ...)                   \
    do {                                        \
        if (!(cond)) ::kiln::fail(__VA_ARGS__); \
    } while (0)

// As KILN_CHECK, raising kiln::IndexError.
#define KILN_CHECK_INDEX(cond, ...)                                    \
    do {                                                               \
        if (!(cond)) ::kiln::fail_as<::kiln::IndexError>(__VA_ARGS__); \
    } while (0)
