// Opening a library at run time and binding its entry points by name (tensor/cuda_library.cpp),
// as every CUDA library and NCCL is loaded. Checked on libm, which every machine has: a
// symbol found, one missing, and a library that does not open, each error naming the
// library, the symbol and where it was looked for.
#include <boost/test/unit_test.hpp>
#include <string>

#include "tensor/cuda_runtime.h"
#include "tensor/error.h"
#include "tests/robustness/hostile.h"

using kiln::cuda::detail::LibrarySymbols;
using kiln::cuda::detail::open_library;

namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_library)

BOOST_AUTO_TEST_CASE(symbols_of_an_opened_library_bind_by_name) {
    std::string why;
    void* lib = open_library({"libkiln_no_such_library.so.1", "libm.so.6"}, why);
    BOOST_REQUIRE(lib);
    BOOST_TEST(contains(why, "libkiln_no_such_library.so.1"), why);  // the name tried first
    LibrarySymbols libm(lib, "libm.so.6");
    BOOST_TEST(contains(libm.file(), "libm"), libm.file());
    double (*cos_fn)(double) = nullptr;
    libm.bind(cos_fn, "cos");
    BOOST_REQUIRE(cos_fn);
    BOOST_TEST(cos_fn(0.0) == 1.0);
    double (*pow_fn)(double, double) = nullptr;
    BOOST_TEST(libm.bind_optional(pow_fn, "pow"));
    BOOST_TEST(pow_fn(2.0, 10.0) == 1024.0);
}

BOOST_AUTO_TEST_CASE(a_missing_symbol_raises_naming_the_library_the_symbol_and_the_file) {
    std::string why;
    void* lib = open_library({"libm.so.6"}, why);
    BOOST_REQUIRE(lib);
    LibrarySymbols libm(lib, "libm.so.6");
    void (*missing)() = nullptr;
    hostile::expect_error(
        [&] { libm.bind(missing, "kiln_no_such_symbol"); },
        {"libm.so.6: symbol kiln_no_such_symbol missing", "looked up in " + libm.file()});
    BOOST_TEST(!missing);
    // An entry point only some versions have: absent is an answer, not an error.
    BOOST_TEST(!libm.bind_optional(missing, "kiln_no_such_symbol"));
    BOOST_TEST(!missing);
}

BOOST_AUTO_TEST_CASE(a_library_that_does_not_open_raises_naming_it) {
    std::string why;
    void* lib = open_library({"libkiln_no_such_library.so.1", "/nonexistent/libkiln.so"}, why);
    BOOST_TEST(!lib);
    BOOST_TEST(contains(why, "libkiln_no_such_library.so.1"), why);  // each name tried, with
    BOOST_TEST(contains(why, "/nonexistent/libkiln.so"), why);       // the loader's reason
    hostile::expect_error([&] { LibrarySymbols symbols(lib, "libkiln_no_such_library.so.1"); },
                          {"libkiln_no_such_library.so.1: not loaded"});
}

BOOST_AUTO_TEST_SUITE_END()
