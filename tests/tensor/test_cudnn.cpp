// tensor/cudnn.cpp without a GPU: the operation graphs kiln builds for cuDNN's backend API
// (tensors, convolution, operation, graph) are accepted by the installed cuDNN for every
// direction, dtype and window the GPU tests run (the engine choice and the runs themselves
// need a device: tests/cuda/test_cuda_cudnn.cpp). Where libcudnn.so.9
// is not found, the cases say why they are skipped.
#include <boost/test/unit_test.hpp>
#include <string>

#include "tensor/cudnn.h"
#include "tensor/error.h"

using kiln::cuda::detail::cudnn_check_graph;
using kiln::cuda::detail::CudnnConv;

namespace {

boost::test_tools::assertion_result cudnn_loads(boost::unit_test::test_unit_id) {
    try {
        cudnn_check_graph({1, 1, 3, 3, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, false}, 0);
        return true;
    } catch (const kiln::Error& e) {
        boost::test_tools::assertion_result r(false);
        r.message() << e.what();
        return r;
    }
}

const char* const kDirections[3] = {"forward", "input gradient", "weight gradient"};

}  // namespace

BOOST_AUTO_TEST_SUITE(tensor_cudnn)

BOOST_AUTO_TEST_CASE(cudnn_accepts_the_graph_of_every_direction_dtype_and_window,
                     *boost::unit_test::precondition(cudnn_loads)) {
    // n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, f64 (as the GPU tests' cases)
    const CudnnConv cases[] = {
        {2, 3, 9, 11, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},    // same padding
        {2, 4, 10, 10, 6, 3, 3, 2, 2, 1, 0, 1, 1, 2, false},   // strided, grouped
        {1, 6, 12, 12, 6, 3, 3, 1, 1, 2, 2, 2, 2, 6, false},   // depthwise, dilated
        {3, 8, 7, 7, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},    // 1x1
        {2, 3, 20, 20, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1, false},   // a ResNet stem
        {2, 4, 9, 8, 4, 2, 3, 3, 2, 0, 1, 1, 2, 1, false},     // uneven everything
        {1, 3, 11, 13, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, false},   // batch 1, stride 2, odd sizes
        {2, 8, 9, 9, 12, 3, 3, 1, 1, 1, 1, 1, 1, 4, false},    // 4 groups
        {2, 8, 15, 15, 8, 3, 3, 2, 2, 1, 1, 1, 1, 8, false},   // depthwise, stride 2
        {2, 8, 13, 13, 16, 1, 1, 2, 2, 0, 0, 1, 1, 1, false},  // 1x1 stride 2
        {2, 4, 12, 10, 6, 3, 3, 1, 1, 0, 0, 3, 2, 2, false},   // dilated, grouped
        {1, 1, 1, 1, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},     // one pixel
    };
    for (CudnnConv g : cases)
        for (bool f64 : {false, true})
            for (int d = 0; d < 3; ++d) {
                g.f64 = f64;
                std::string why = cudnn_check_graph(g, d);
                BOOST_TEST(why.empty(), kDirections[d] << (f64 ? ", float64" : ", float32")
                                                       << " of input [" << g.n << ", " << g.c
                                                       << ", " << g.h << ", " << g.w
                                                       << "]: " << why);
            }
}

// A window larger than its padded input has no output: cuDNN refuses the graph, and the
// message names the op, the direction, the geometry and cuDNN's status.
BOOST_AUTO_TEST_CASE(a_graph_cudnn_refuses_is_explained,
                     *boost::unit_test::precondition(cudnn_loads)) {
    CudnnConv g = {1, 2, 2, 2, 3, 5, 5, 1, 1, 0, 0, 1, 1, 1, false};
    std::string why = cudnn_check_graph(g, 0);
    BOOST_TEST_MESSAGE(why);
    BOOST_TEST(why.find("conv2d on CUDA: cuDNN ") == 0, why);
    BOOST_TEST(why.find("planning the forward of input [1, 2, 2, 2], weight [3, 2, 5, 5]") !=
                   std::string::npos,
               why);
    BOOST_TEST(why.find("CUDNN_STATUS_") != std::string::npos, why);
}

BOOST_AUTO_TEST_SUITE_END()
