// Module::state_dict / load_state_dict (PyTorch's names, checks and messages) and the
// .npy directory form of a state dict.
#include "nn/state_dict.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <unordered_set>

#include "autograd/node.h"
#include "tensor/npy.h"

namespace kiln::nn {

namespace fs = std::filesystem;

StateDict Module::state_dict() const {
    StateDict all, unique;
    collect_state("", all);
    std::unordered_set<TensorImpl*> seen;  // a tied tensor once, under its first name
    for (auto& [name, t] : all)
        if (seen.insert(t.impl()).second) unique.emplace_back(name, t.detach());
    return unique;
}

namespace {

// PyTorch's list form: "a", "b".
std::string quoted_list(const std::vector<std::string>& keys) {
    std::string out;
    for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", \"" : "\"") + keys[i] + "\"";
    return out;
}

}  // namespace

IncompatibleKeys Module::load_state_dict(const StateDict& dict, bool strict) {
    StateDict own;
    collect_state("", own);
    std::map<std::string, Tensor> by_name(own.begin(), own.end());

    IncompatibleKeys result;
    std::vector<std::string> mismatches;
    std::vector<std::pair<Tensor, Tensor>>
        copies;  // (destination, value), done once all is checked
    std::unordered_set<TensorImpl*> present;
    std::unordered_set<std::string> keys;
    for (const auto& [key, value] : dict) {
        KILN_CHECK(keys.insert(key).second, "load_state_dict: key \"", key,
                   "\" appears twice in the state dict");
        auto it = by_name.find(key);
        if (it == by_name.end()) {
            result.unexpected_keys.push_back(key);
            continue;
        }
        const Tensor& dest = it->second;
        present.insert(dest.impl());  // a key with a bad value is reported as such, not as missing
        if (!value.defined()) {
            mismatches.push_back("the value for " + key + " is an undefined tensor.");
            continue;
        }
        if (value.shape() != dest.shape()) {
            using kiln::operator<<;  // Shape is a std::vector: ADL does not find kiln's printer
            std::ostringstream os;
            os << "size mismatch for " << key << ": copying a param with shape " << value.shape()
               << " from checkpoint, the shape in current model is " << dest.shape() << ".";
            mismatches.push_back(os.str());
            continue;
        }
        copies.emplace_back(dest, value);
    }
    std::unordered_set<TensorImpl*>
        seen;  // a tied tensor is missing only when none of its names came
    for (const auto& [name, t] : own)
        if (seen.insert(t.impl()).second && !present.count(t.impl()))
            result.missing_keys.push_back(name);

    std::ostringstream errors;
    if (strict && !result.missing_keys.empty())
        errors << "\n\tMissing key(s) in state_dict: " << quoted_list(result.missing_keys) << ".";
    if (strict && !result.unexpected_keys.empty())
        errors << "\n\tUnexpected key(s) in state_dict: " << quoted_list(result.unexpected_keys)
               << ".";
    for (const std::string& m : mismatches) errors << "\n\t" << m;
    KILN_CHECK(errors.str().empty(), "load_state_dict: Error(s) in loading state_dict for ",
               type_name(), ":", errors.str());

    autograd::NoGradGuard no_grad;
    for (auto& [dest, value] : copies)
        Tensor(dest).copy_(value.device() == dest.device() ? value : value.to(dest.device()));
    return result;
}

void save_state_dict(const Module& module, const std::string& dir) {
    StateDict entries = module.state_dict();
    for (const auto& [key, t] : entries)  // a key names a file inside dir, never a path out of it
        KILN_CHECK(!key.empty() && key.front() != '.' && key.find('/') == std::string::npos &&
                       key.find('\0') == std::string::npos,
                   "save_state_dict: the key '", key, "' cannot be a file name in '", dir, "'");
    std::error_code ec;
    fs::create_directories(dir, ec);
    KILN_CHECK(!ec && fs::is_directory(dir), "save_state_dict: cannot create the directory '", dir,
               "': ", ec.message());
    for (const auto& [key, t] : entries)
        save_npy(t.device() == kiln::cpu ? t : t.to(kiln::cpu),
                 (fs::path(dir) / (key + ".npy")).string());
}

StateDict read_state_dict_npy(const std::string& dir) {
    KILN_CHECK(fs::is_directory(dir), "read_state_dict_npy: '", dir, "' is not a directory");
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file() && entry.path().extension() == ".npy")
            files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    StateDict out;
    for (const fs::path& f : files) out.emplace_back(f.stem().string(), load_npy(f.string()));
    return out;
}

IncompatibleKeys load_state_dict_npy(Module& module, const std::string& dir, bool strict) {
    return module.load_state_dict(read_state_dict_npy(dir), strict);
}

}  // namespace kiln::nn
