// The precondition of every GPU test case in tests/cuda: prints why it is skipped, so a
// skip is never silent (`what` names the suite in the message).
#pragma once
#include <boost/test/unit_test.hpp>

#include <iostream>
#include <string>

#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"

namespace kiln_test {

inline const kiln::Device kCuda{kiln::DeviceType::cuda, 0};

struct NeedsGpu {
    std::string what = "cuda";
    boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) {
        if (kiln::cuda::is_available()) return true;
        std::cout << what << ": SKIPPED (no usable GPU: " << kiln::cuda::unavailable_reason() << ")\n";
        boost::test_tools::assertion_result r(false);
        r.message() << "no usable GPU: " << kiln::cuda::unavailable_reason();
        return r;
    }
};

// For compile-only cases (NVRTC, no GPU): true when NVRTC loads; otherwise prints why the
// case is skipped (`what` names the suite) and returns false.
inline bool have_nvrtc(const std::string& what) {
    const std::string why = kiln::cuda::detail::nvrtc_unavailable_reason();
    if (why.empty()) return true;
    std::cout << what << ": SKIPPED compile-only test (" << why << ")\n";
    return false;
}

}  // namespace kiln_test
