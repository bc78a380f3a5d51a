#!/bin/sh
# A kiln binary started with the CUDA libraries out of reach (LD_LIBRARY_PATH pointing
# nowhere) starts, reports torch.cuda.is_available() == False, and a CUDA call raises an
# error naming the missing library; the script goes on after it. Usage: hidden_libraries.sh KILN
kiln="$1"
script=$(mktemp "${TMPDIR:-/tmp}/kiln_hidden_XXXXXX.ks")
trap 'rm -f "$script"' EXIT
cat > "$script" <<'KS'
import torch
print(torch.cuda.is_available())
try:
    torch.zeros(2).cuda()
except RuntimeError as e:
    print("raised:", e)
print("still running")
KS
out=$(LD_LIBRARY_PATH=/nonexistent "$kiln" run "$script" 2>&1) || { echo "kiln failed with CUDA libraries hidden:"; echo "$out"; exit 1; }
echo "$out"
echo "$out" | grep -qx "still running" || { echo "FAIL: the script did not run to its end"; exit 1; }
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    # A driver in the loader's cache is found whatever LD_LIBRARY_PATH says (a GPU machine).
    echo "cuda.hidden_libraries: libcuda.so.1 is in the loader cache, LD_LIBRARY_PATH cannot hide it; checked only that kiln starts"
    exit 0
fi
echo "$out" | grep -qx "False" || { echo "FAIL: is_available() was not False"; exit 1; }
echo "$out" | grep -q "^raised: .*libcuda\.so\.1" || { echo "FAIL: the error does not name libcuda.so.1"; exit 1; }
echo "cuda.hidden_libraries: PASS"
