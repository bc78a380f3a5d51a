// Opening the libraries kiln loads at run time (the CUDA driver, NVRTC, cuBLAS, cuDNN,
// cublasLt, NCCL) with dlopen, and binding their entry points by name (tensor/cuda_runtime.h).
#include <dlfcn.h>
#include <link.h>

#include "tensor/cuda_runtime.h"
#include "tensor/error.h"

namespace kiln::cuda::detail {

void* open_library(std::initializer_list<const char*> names, std::string& why) {
    for (const char* name : names) {
        if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return lib;
        why += std::string(why.empty() ? "" : "; ") + dlerror();
    }
    return nullptr;
}

namespace {
// The file the loader opened for `lib` (a bare name like libcuda.so.1 is found on its path).
std::string loaded_file(void* lib) {
    link_map* map = nullptr;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name || !*map->l_name)
        return "(unknown file)";
    return map->l_name;
}
}  // namespace

LibrarySymbols::LibrarySymbols(void* lib, std::string library)
    : lib_(lib), library_(std::move(library)) {
    KILN_CHECK(lib_, library_,
               ": not loaded (no file of that name opened), so its symbols cannot be bound");
    file_ = loaded_file(lib_);
}

void* LibrarySymbols::find_optional(const char* symbol) const { return dlsym(lib_, symbol); }

void* LibrarySymbols::find(const char* symbol) const {
    void* fn = find_optional(symbol);
    KILN_CHECK(fn, library_, ": symbol ", symbol, " missing (looked up in ", file_, ")");
    return fn;
}

}  // namespace kiln::cuda::detail
