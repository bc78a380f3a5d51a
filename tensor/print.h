// Printing tensors like PyTorch: tensor([[1.0000, 2.0000]], requires_grad=True).
#pragma once
#include <ostream>
#include <string>

#include "tensor/tensor.h"

namespace kiln {
std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string to_string(const Tensor& t);
}  // namespace kiln
