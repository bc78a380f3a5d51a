// State dicts on disk as a directory of .npy files, one per entry, named by its PyTorch key
// (layer1.0.conv1.weight.npy), so NumPy and PyTorch read and write them without kiln:
//   kiln:    nn::save_state_dict(model, "weights/");  nn::load_state_dict_npy(model, "weights/");
//   PyTorch: for k, v in m.state_dict().items(): np.save(f"weights/{k}.npy", v.numpy())
// Module::state_dict() / load_state_dict() themselves are declared in nn/module.h.
#pragma once
#include <string>

#include "nn/module.h"

namespace kiln::nn {

// Writes <dir>/<key>.npy for every entry of module.state_dict(), creating dir if needed and
// overwriting files of the same name; other files in dir are left alone.
void save_state_dict(const Module& module, const std::string& dir);

// Every <key>.npy file of dir as (key, tensor), sorted by key; other files are ignored.
// A missing dir is an error naming it.
StateDict read_state_dict_npy(const std::string& dir);

// module.load_state_dict(read_state_dict_npy(dir), strict).
IncompatibleKeys load_state_dict_npy(Module& module, const std::string& dir, bool strict = true);

}  // namespace kiln::nn
