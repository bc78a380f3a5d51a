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

// Builds a message from streamable parts: KILN_CHECK(cond, "matmul: ", a.shape(), " vs ", ...).
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
    std::ostringstream os;
    (os << ... << parts);
    throw Error(os.str());
}

}  // namespace kiln

#define KILN_CHECK(cond, ...)                   \
    do {                                        \
        if (!(cond)) ::kiln::fail(__VA_ARGS__); \
    } while (0)
