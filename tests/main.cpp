// The one Boost.Test main shared by every test executable (header-only Boost.Test, built once).
#define BOOST_TEST_MODULE kiln
#include <boost/test/included/unit_test.hpp>
