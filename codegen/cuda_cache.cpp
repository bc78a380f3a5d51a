// Cubins on disk: NVRTC's output kept in the same per-user cache directory as the CPU
// kernels (codegen/disk_cache.h), under the same checks: an entry cuda-<hash>.cubin is
// loaded only if it and its .meta are ours, not writable by others, and its size and hash
// match. The hash covers the whole key (cuda::detail::cubin_cache_key: NVRTC version, target
// sm_XX (or compute_XX PTX for a device newer than NVRTC), NVRTC options, kernel name,
// source), and the key itself is stored beside the cubin and compared, so a hash collision
// cannot load the wrong code. Eager CUDA kernels (tensor/kernels_cuda.cpp) and generated ones
// (codegen/cuda_backend.cpp) both compile through cuda::detail::kernel, so both are kept.
#include <filesystem>

#include "codegen/disk_cache.h"
#include "codegen/inductor.h"
#include "tensor/cuda_runtime.h"

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;

// cuda-<hash>.cubin and cuda-<hash>-key.txt (each with its own .meta).
fs::path entry_for(const std::string& key) { return cache_dir() / ("cuda-" + hex64(fnv1a64(key)) + ".cubin"); }
fs::path key_file_for(const fs::path& entry) { return fs::path(entry).replace_extension("").string() + "-key.txt"; }

std::optional<std::string> load(const std::string& key) {
    try {
        fs::path entry = entry_for(key);
        fs::path key_file = key_file_for(entry);
        if (!cache_entry_valid(entry) || !cache_entry_valid(key_file)) return std::nullopt;
        if (read_file(key_file) != key) return std::nullopt;
        return read_file(entry);
    } catch (const Error&) {  // an unusable cache directory: compile instead
        return std::nullopt;
    }
}

void save(const std::string& key, const std::string& bytes) {
    try {
        fs::path entry = entry_for(key);
        fs::path key_file = key_file_for(entry);
        for (const auto& [path, content] : {std::pair{key_file, &key}, std::pair{entry, &bytes}}) {
            fs::path temp = unique_temp_path(path);
            write_file_atomic(temp, *content);
            cache_publish(temp, path);
        }
    } catch (const Error&) {  // a full disk or a read-only cache: the next process compiles again
    }
}

}  // namespace

bool register_cubin_disk_cache() {
    cuda::detail::set_cubin_store({load, save});
    return true;
}

}  // namespace kiln::codegen
