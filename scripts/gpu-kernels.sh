#!/bin/sh
# gpu-kernels.sh cuda|hip OUT SRC...: compiles the kernels of kernels/cuda/ into
# one image: a fatbin with machine code for every NVIDIA architecture nvcc
# accepts from sm_75 up plus PTX of the newest (so later GPUs JIT it), or a
# code object bundle for the AMD targets hipcc has device libraries for.
set -eu
kind=$1 out=$2
shift 2
dir=$(dirname "$out")
mkdir -p "$dir"
# One translation unit, so that the image is one module. Each file goes in a
# namespace of its own (its extern "C" kernels keep their plain names), so that
# file-local helpers may have the same names in two files; compat.h comes first,
# at file scope, where every file finds it.
all="$dir/all.cu"
echo '#include "compat.h"' > "$all"
i=0
for f in "$@"; do
    printf 'namespace tq_kernel_file_%d {\n#include "%s"\n}\n' $i "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" >> "$all"
    i=$((i + 1))
done
case $kind in
cuda)
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    codes=$("$nvcc" --list-gpu-code | sed -n 's/^sm_\([0-9]*\)$/\1/p' | awk '$1 >= 75' | sort -n)
    [ -n "$codes" ] || { echo "gpu-kernels: $nvcc lists no architecture from sm_75 up" >&2; exit 1; }
    gen=""
    for c in $codes; do gen="$gen -gencode arch=compute_$c,code=sm_$c"; done
    newest=$(echo "$codes" | tail -n 1)
    gen="$gen -gencode arch=compute_$newest,code=compute_$newest"
    echo "gpu-kernels: cuda: sm_$(echo $codes | sed 's/ /, sm_/g') + PTX $newest"
    # shellcheck disable=SC2086
    "$nvcc" --fatbin -O3 -std=c++17 -Xcompiler -Wall -Werror all-warnings -Ikernels/cuda $gen -o "$out" "$all"
    ;;
hip)
    bc=$(dirname "$(find /usr/lib /opt/rocm* -name 'oclc_isa_version_900.bc' 2>/dev/null | head -n 1)" 2>/dev/null || true)
    targets=""
    for t in gfx900 gfx906 gfx908 gfx90a gfx940 gfx941 gfx942 gfx1030 gfx1100 gfx1101 gfx1102 gfx1200 gfx1201; do
        [ -f "$bc/oclc_isa_version_${t#gfx}.bc" ] && targets="$targets $t"
    done
    [ -n "$targets" ] || { echo "gpu-kernels: no ROCm device libraries for any target" >&2; exit 1; }
    echo "gpu-kernels: hip:$targets"
    arch=""
    for t in $targets; do arch="$arch --offload-arch=$t"; done
    # shellcheck disable=SC2086
    hipcc --genco -O3 -std=c++17 -Wall -Werror -Ikernels/cuda $arch -o "$out" "$all"
    ;;
*) echo "gpu-kernels: cuda or hip, not $kind" >&2; exit 2 ;;
esac
