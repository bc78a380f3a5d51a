// kiln: the one header a user includes.
#pragma once
#include "autograd/node.h"
#include "tensor/ops.h"
#include "tensor/print.h"
#include "tensor/tensor.h"
