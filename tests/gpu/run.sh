#!/usr/bin/env bash
# The GPU machine's check: builds kiln from a clean build directory and runs the whole suite
# (CPU and CUDA tests; the CUDA ones run instead of skipping), then prints a summary.
#   tests/gpu/run.sh             # dependencies installed system-wide
#   tests/gpu/run.sh DEPS_DIR    # dependencies packed by shared/gpu/pack-deps.sh (no apt there)
#   KILN_GPU_TARGETS="test_cuda bench_gpu" tests/gpu/run.sh DEPS_DIR   # build only these, run no tests
#   KILN_GPU_TARGETS=all tests/gpu/run.sh DEPS_DIR; KILN_GPU_REUSE=1 tests/gpu/run.sh DEPS_DIR
#       # the build in one call and the tests in the next (a device call lasts 10 minutes at most):
#       # KILN_GPU_REUSE=1 keeps the build directory, so only what changed is built again
# CPATH is deliberately not set: generated kernels must find xsimd through the include
# directories CMake found (codegen/cpu_backend.cpp), as for a user with a conda or source install.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${KILN_GPU_BUILD:-$root/build-gpu-check}
[ "${KILN_GPU_REUSE:-0}" = 1 ] || rm -rf "$build"
flags=(-DCMAKE_BUILD_TYPE=Release)
if [ -n "${1:-}" ]; then
  deps=$(cd "$1" && pwd)
  export LD_LIBRARY_PATH="$deps/lib:${LD_LIBRARY_PATH:-}"
  flags+=(-DCMAKE_PREFIX_PATH="$deps" -DCMAKE_POLICY_DEFAULT_CMP0167=OLD -DBoost_INCLUDE_DIR="$deps/include"
          -DBoost_NO_SYSTEM_PATHS=ON -DBLAS_LIBRARIES="$deps/lib/libopenblas.so" -DCMAKE_CXX_FLAGS="-I$deps/include"
          -DKILN_READLINE_INCLUDE="$deps/include" -DKILN_READLINE_LIB="$deps/lib/libreadline.so")
fi
start=$(date +%s)
cmake -S "$root" -B "$build" "${flags[@]}" > "$build.configure.log" 2>&1 || { tail -30 "$build.configure.log"; exit 1; }
targets=()
[ -n "${KILN_GPU_TARGETS:-}" ] && targets=(--target ${KILN_GPU_TARGETS})
cmake --build "$build" -j "$(nproc)" "${targets[@]}" > "$build.build.log" 2>&1 || { grep -E "error" -A3 "$build.build.log" | head -40; exit 1; }
if [ -n "${KILN_GPU_TARGETS:-}" ]; then echo "== built ${KILN_GPU_TARGETS} in $(( $(date +%s) - start )) s"; exit 0; fi
built=$(date +%s)
cd "$build"
echo "== GPU: $(nvidia-smi -L 2>/dev/null | head -1 || echo none)"
# KILN_REQUIRE_GPU=1: the lessons with a GPU part (07, 08, 09) are checked against their
# expected/NN_name.cuda.txt and fail if they find no GPU (tutorials/check_lesson.cmake).
# test_cuda runs alone after the rest: beside 200 other entries at -j 64 on the 4-GPU host it
# had not finished after 540 s (2026-11-27, docs/cuda.md), where alone it takes 40-160 s.
KILN_REQUIRE_GPU=1 KILN_CACHE_DIR="$build/kernel-cache" ctest -j "$(nproc)" -E '^cuda$' --output-on-failure > ctest.log 2>&1 && rc=0 || rc=$?
KILN_REQUIRE_GPU=1 KILN_CACHE_DIR="$build/kernel-cache" ctest -R '^cuda$' --output-on-failure >> ctest.log 2>&1 || rc=1
grep -E "tests passed|Total Test time|\(Failed\)|\(Timeout\)|\(Subprocess" ctest.log || true
# test_cuda's own summary lines (what ran, what skipped) from CTest's full log: running the
# binary a second time before CTest cost two minutes of the call's ten.
echo "== test_cuda's summary lines:"
grep -E "^cuda[ :a-z_-]*:" Testing/Temporary/LastTest.log | head -40 || true
echo "== lessons with a GPU part (expected/*.cuda.txt):"
grep -E "tutorial\.(07|08|09)_" ctest.log | grep -E "Passed|Failed|Timeout" || true
# Assignment 6's GPU tasks run here instead of skipping: every case of the solution must run.
echo "== assignment 6 (CUDA emitter), solution on this GPU: $(KILN_CACHE_DIR="$build/kernel-cache" ./assignment_grader --solution 6 2>&1 | grep '^total:')"
[ $rc -eq 0 ] || grep -B5 -A40 "\*\*\*Failed\|error:" ctest.log | head -150
# The wide differential tester on CUDA tensors (KILN_GPU_FUZZ programs per backend; 0: skip).
fuzz_n=${KILN_GPU_FUZZ:-300}
if [ "$fuzz_n" -gt 0 ]; then
  KILN_FUZZ_DEVICE=cuda KILN_FUZZ_PROGRAMS=$fuzz_n KILN_CACHE_DIR="$build/kernel-cache" \
    ./test_jit --run_test=jit_differential_wide --log_level=message > fuzz-cuda.log 2>&1 && frc=0 || frc=$?
  grep -E "jit differential|error" fuzz-cuda.log | head -20
  [ $frc -eq 0 ] || rc=$frc
fi
echo "== build $((built - start)) s, tests $(( $(date +%s) - built )) s, ctest exit $rc"
exit $rc
