// Sets an environment variable for one scope, then puts the old value back (or unsets it).
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace kiln_test {

struct ScopedEnv {
    std::string name;
    std::optional<std::string> old;
    ScopedEnv(const std::string& n, const std::string& value) : name(n) {
        if (const char* v = std::getenv(n.c_str())) old = v;
        setenv(n.c_str(), value.c_str(), 1);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
    ~ScopedEnv() {
        if (old)
            setenv(name.c_str(), old->c_str(), 1);
        else
            unsetenv(name.c_str());
    }
};

}  // namespace kiln_test
