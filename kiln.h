// kiln: the one header a user includes.
#pragma once
#include <iostream>
#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "nn/attention.h"
#include "nn/conv.h"
#include "nn/functional.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/state_dict.h"
#include "optim/optimizer.h"
#include "tensor/npy.h"
#include "tensor/ops.h"
#include "tensor/print.h"
#include "tensor/tensor.h"
#include "jit/compile.h"
#include "jit/explain.h"
#include "jit/export.h"
#include "jit/trace.h"
// Registers the real "inductor" backend (codegen/); see codegen/inductor.h for why here.
#include "codegen/inductor.h"
