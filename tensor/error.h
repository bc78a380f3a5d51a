// kiln::Error: every user-facing failure, with the op and the values involved.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

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
