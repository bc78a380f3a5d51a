// .npy files: exchange tensors with NumPy (np.save / np.load) and PyTorch users.
#pragma once
#include <string>

#include "tensor/tensor.h"

namespace kiln {

// Writes `t` (float32, float64, int64 or bool; any strides) as NPY format v1.0, C order,
// little-endian; v2.0 only if the header outgrows v1.0's 64 KiB.
void save_npy(const Tensor& t, const std::string& path);

// Reads an NPY v1.0/v2.0/v3.0 file of dtype <f4, <f8, <i8 or |b1 into a new contiguous
// tensor. Fortran-order files are reordered into C order. Errors name the path.
Tensor load_npy(const std::string& path);

}  // namespace kiln
