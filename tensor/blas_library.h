// The BLAS behind matmul (tensor/gemm.cpp), opened at run time with dlopen rather than linked,
// so that kiln can choose OpenBLAS's kernels for this CPU before OpenBLAS's start-up does
// (docs/env.md: KILN_BLAS_LIB, OPENBLAS_CORETYPE; KILN_LOGS=blas prints the choice).
#pragma once
#include <cblas.h>

#include <string>
#include <string_view>

namespace kiln {

// The widest float vectors a CPU runs, or an OpenBLAS core's GEMM kernels use.
enum class VectorLevel { baseline, avx2, avx512 };  // avx2: with FMA; avx512: F, CD, BW, DQ, VL

VectorLevel cpu_vector_level();  // this CPU, as the OS enables it (baseline off x86-64)
// "SkylakeX" (any case) -> avx512, "Haswell" -> avx2, "Prescott" or unknown -> baseline.
VectorLevel openblas_core_level(std::string_view core);
const char* vector_level_name(VectorLevel level);  // "AVX-512", "AVX2+FMA", "no AVX2"

struct BlasLibrary {
    std::string file;  // the file dlopen opened
    std::string core;  // openblas_get_corename(): "SkylakeX"; "" for a BLAS that is not OpenBLAS
    std::string chosen_by;  // why that core, in words (KILN_LOGS=blas prints it)
    decltype(&cblas_sgemm) sgemm = nullptr;
    decltype(&cblas_dgemm) dgemm = nullptr;
    void (*set_num_threads)(int) = nullptr;  // OpenBLAS only; null for another BLAS
    int (*get_num_threads)() = nullptr;      // OpenBLAS only
    // OpenBLAS's idle threads spin 2^thread_timeout cycles before sleeping: the
    // OPENBLAS_THREAD_TIMEOUT it read at its load (openblas_thread_timeout()) clamped to
    // [4, 30] as OpenBLAS does, 28 where it was unset; -1 for another BLAS.
    int thread_timeout = -1;
};

// Opens the BLAS on the first call (thread-safe) and returns it from then on. Where:
// KILN_BLAS_LIB alone when set; else the library CMake found (compiled in), then
// libopenblas.so.0, then libblas.so.3. Unless the user set OPENBLAS_CORETYPE, an OpenBLAS
// whose own core uses narrower vectors than the CPU has (Prescott on an AVX-512 Xeon it does
// not recognise) is closed and opened again with OPENBLAS_CORETYPE=SkylakeX (AVX-512) or
// Haswell (AVX2+FMA), set for that load only. Unless the user set OPENBLAS_THREAD_TIMEOUT,
// OpenBLAS is loaded with it at 4, so its idle threads sleep at once instead of spinning
// beside kiln's (tensor/blas_library.cpp). Raises kiln::Error naming each file tried when
// none opens with cblas_sgemm in it.
const BlasLibrary& blas();

}  // namespace kiln
