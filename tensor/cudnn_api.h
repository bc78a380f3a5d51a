// Internal to tensor/: the part of cuDNN 9's C API that tensor/cudnn.cpp calls, declared here
// because kiln includes no CUDA header (tensor/cuda_runtime.h says why) and opens cuDNN with
// dlopen. The values are copied from cuDNN 9.19's cudnn_graph.h (the backend API's enums,
// cudnnStatus_t, cudnnDataType_t) and cudnn_ops.h (cudnnAddTensor); tests/tensor/
// test_cudnn_api.cpp checks every value and signature against those headers where installed.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/symbol_table.h"

namespace kiln::cuda::detail {
class LibrarySymbols;  // tensor/cuda_runtime.h
}

namespace kiln::cuda::detail::cudnn_api {

using cudnnStatus_t = int;  // CUDNN_STATUS_SUCCESS = 0
using cudnnHandle_t = void*;
using cudnnBackendDescriptor_t = void*;
using cudnnTensorDescriptor_t = void*;  // legacy (cudnn_ops.h): the bias add only

// cudnnStatus_t (cudnn_graph.h)
constexpr int CUDNN_STATUS_SUCCESS = 0;
constexpr int CUDNN_STATUS_NOT_SUPPORTED = 3000;  // and 3001..3014: NOT_SUPPORTED_*

// cudnnDataType_t (cudnn_graph.h)
constexpr int CUDNN_DATA_FLOAT = 0, CUDNN_DATA_DOUBLE = 1;
// cudnnTensorFormat_t (cudnn_graph.h), for the legacy bias descriptor
constexpr int CUDNN_TENSOR_NCHW = 0;
// cudnnConvolutionMode_t (cudnn_graph.h)
constexpr int CUDNN_CROSS_CORRELATION = 1;

// cudnnBackendDescriptorType_t (cudnn_graph.h)
constexpr int CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR = 1;
constexpr int CUDNN_BACKEND_ENGINE_DESCRIPTOR = 2;
constexpr int CUDNN_BACKEND_ENGINECFG_DESCRIPTOR = 3;
constexpr int CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR = 4;
constexpr int CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR = 5;
constexpr int CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR = 10;
constexpr int CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR = 11;
constexpr int CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR = 12;
constexpr int CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR = 15;
constexpr int CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR = 16;
constexpr int CUDNN_BACKEND_TENSOR_DESCRIPTOR = 17;

// cudnnBackendAttributeType_t (cudnn_graph.h): the type of an attribute's elements
constexpr int CUDNN_TYPE_HANDLE = 0;               // cudnnHandle_t
constexpr int CUDNN_TYPE_DATA_TYPE = 1;            // cudnnDataType_t
constexpr int CUDNN_TYPE_INT64 = 3;                // int64_t
constexpr int CUDNN_TYPE_FLOAT = 4;                // float
constexpr int CUDNN_TYPE_DOUBLE = 5;               // double
constexpr int CUDNN_TYPE_VOID_PTR = 6;             // void*
constexpr int CUDNN_TYPE_CONVOLUTION_MODE = 7;     // cudnnConvolutionMode_t
constexpr int CUDNN_TYPE_HEUR_MODE = 8;            // cudnnBackendHeurMode_t
constexpr int CUDNN_TYPE_NUMERICAL_NOTE = 11;      // cudnnBackendNumericalNote_t
constexpr int CUDNN_TYPE_BACKEND_DESCRIPTOR = 15;  // cudnnBackendDescriptor_t

// cudnnBackendAttributeName_t (cudnn_graph.h)
constexpr int CUDNN_ATTR_CONVOLUTION_COMP_TYPE = 100;
constexpr int CUDNN_ATTR_CONVOLUTION_CONV_MODE = 101;
constexpr int CUDNN_ATTR_CONVOLUTION_DILATIONS = 102;
constexpr int CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES = 103;
constexpr int CUDNN_ATTR_CONVOLUTION_POST_PADDINGS = 104;
constexpr int CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS = 105;
constexpr int CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS = 106;
constexpr int CUDNN_ATTR_ENGINEHEUR_MODE = 200;
constexpr int CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH = 201;
constexpr int CUDNN_ATTR_ENGINEHEUR_RESULTS = 202;
constexpr int CUDNN_ATTR_ENGINECFG_ENGINE = 300;
// Deprecated since 9.x in favour of a device-properties descriptor, still honoured; kept so
// that one kiln binary runs with every cuDNN 9 (PyTorch's wheels ship several).
constexpr int CUDNN_ATTR_EXECUTION_PLAN_HANDLE = 400;
constexpr int CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG = 401;
constexpr int CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE = 402;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA = 700;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA = 701;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC = 702;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W = 703;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X = 704;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y = 705;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA = 706;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA = 707;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC = 708;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W = 709;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX = 710;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY = 711;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA = 712;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA = 713;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC = 714;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW = 715;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X = 716;
constexpr int CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY = 717;
constexpr int CUDNN_ATTR_OPERATIONGRAPH_HANDLE = 800;  // deprecated as EXECUTION_PLAN_HANDLE
constexpr int CUDNN_ATTR_OPERATIONGRAPH_OPS = 801;
constexpr int CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT = 900;
constexpr int CUDNN_ATTR_TENSOR_DATA_TYPE = 901;
constexpr int CUDNN_ATTR_TENSOR_DIMENSIONS = 902;
constexpr int CUDNN_ATTR_TENSOR_STRIDES = 903;
constexpr int CUDNN_ATTR_TENSOR_UNIQUE_ID = 906;
constexpr int CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS = 1000;
constexpr int CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS = 1001;
constexpr int CUDNN_ATTR_VARIANT_PACK_WORKSPACE = 1003;
constexpr int CUDNN_ATTR_ENGINE_GLOBAL_INDEX = 1301;
constexpr int CUDNN_ATTR_ENGINE_NUMERICAL_NOTE = 1303;

// cudnnBackendNumericalNote_t (cudnn_graph.h): what an engine does to the numbers
constexpr int CUDNN_NUMERICAL_NOTE_TENSOR_CORE = 0;  // float32 on tensor cores is TF32
constexpr int CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS = 1;
constexpr int CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION = 2;
constexpr int CUDNN_NUMERICAL_NOTE_TYPE_COUNT = 10;

// cudnnBackendHeurMode_t (cudnn_graph.h)
constexpr int CUDNN_HEUR_MODE_FALLBACK = 2;
constexpr int CUDNN_HEUR_MODE_A = 3;

// The entry points, as function types (each Api member points to one); enum parameters are
// int, which is their size and passing convention on every platform cuDNN supports.
using CreateDescriptorFn = cudnnStatus_t(int type, cudnnBackendDescriptor_t* desc);
using DescriptorFn = cudnnStatus_t(cudnnBackendDescriptor_t desc);  // Destroy, Finalize
using SetAttributeFn = cudnnStatus_t(cudnnBackendDescriptor_t desc, int name, int type,
                                     int64_t count, const void* elements);
using GetAttributeFn = cudnnStatus_t(cudnnBackendDescriptor_t desc, int name, int type,
                                     int64_t requested, int64_t* count, void* elements);
using ExecuteFn = cudnnStatus_t(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                cudnnBackendDescriptor_t variant_pack);

// The entry points kiln calls, as a table (tensor/symbol_table.h; bound in tensor/cudnn.cpp).
// The last three make the bias add after the forward convolution: cudnnAddTensor(handle,
// alpha, bias desc, bias, beta, y desc, y), y += bias broadcast over [n, ., h, w].
#define KILN_CUDNN_SYMBOLS(X)                                                                    \
    X(cudnnCreate, "cudnnCreate", cudnnStatus_t (*)(cudnnHandle_t*))                             \
    X(cudnnSetStream, "cudnnSetStream", cudnnStatus_t (*)(cudnnHandle_t, void*))                 \
    X(cudnnGetErrorString, "cudnnGetErrorString", const char* (*)(cudnnStatus_t))                \
    X(cudnnGetVersion, "cudnnGetVersion", size_t (*)())                                          \
    X(cudnnBackendCreateDescriptor, "cudnnBackendCreateDescriptor", CreateDescriptorFn*)         \
    X(cudnnBackendDestroyDescriptor, "cudnnBackendDestroyDescriptor", DescriptorFn*)             \
    X(cudnnBackendFinalize, "cudnnBackendFinalize", DescriptorFn*)                               \
    X(cudnnBackendSetAttribute, "cudnnBackendSetAttribute", SetAttributeFn*)                     \
    X(cudnnBackendGetAttribute, "cudnnBackendGetAttribute", GetAttributeFn*)                     \
    X(cudnnBackendExecute, "cudnnBackendExecute", ExecuteFn*)                                    \
    X(cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor",                                \
      cudnnStatus_t (*)(cudnnTensorDescriptor_t*))                                               \
    X(cudnnSetTensor4dDescriptor, "cudnnSetTensor4dDescriptor",                                  \
      cudnnStatus_t (*)(cudnnTensorDescriptor_t, int format, int data_type, int n, int c, int h, \
                        int w))                                                                  \
    X(cudnnAddTensor, "cudnnAddTensor",                                                          \
      cudnnStatus_t (*)(cudnnHandle_t, const void*, cudnnTensorDescriptor_t, const void*,        \
                        const void*, cudnnTensorDescriptor_t, void*))
struct Api {
    KILN_CUDNN_SYMBOLS(KILN_SYMBOL_FIELD)
    // Optional (null when the library lacks it): the last failure's message, for errors.
    void (*cudnnGetLastErrorString)(char* message, size_t max_size);
    void bind(const LibrarySymbols& symbols);  // tensor/cudnn.cpp
};

}  // namespace kiln::cuda::detail::cudnn_api
