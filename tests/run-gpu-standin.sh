#!/bin/sh
# run-gpu-standin.sh TEST_OPS STANDIN_LIB: the cross-backend op suite on the
# CUDA and HIP backends, through the stand-in driver (tests/standin), once for
# each of two thread-order seeds: a race or a missing barrier in a kernel shows
# as a difference under one of them. Prints "N passed, N failed" for each run
# and appends the counts to $TQ_COUNTS; a build without either backend, or
# without the stand-in, says why and counts as skipped.
set -u
ops=$1 lib=$2
skip() {
    echo "gpu: skipped: $1"
    [ -n "${TQ_COUNTS:-}" ] && echo "0 0 1" >> "$TQ_COUNTS"
    exit 0
}
[ -f "$lib" ] || skip "no stand-in driver at $lib (it needs g++)"
status=0
# The second run also hides cuBLAS and rocBLAS: the backends' own matmul
# kernels then serve every product, as on a machine with the driver alone.
for seed in 1 2; do
    blas="$lib"
    [ "$seed" = 2 ] && blas=/nonexistent/libblas-hidden.so
    out=$(TQ_STANDIN_SEED=$seed TQ_TEST_DEVICES=cuda,hip TQ_CUDA_DRIVER="$lib" TQ_CUBLAS="$blas" \
        TQ_HIP_RUNTIME="$lib" TQ_ROCBLAS="$blas" "$ops" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -v '^ok ' | sed "s/^/gpu seed $seed: /"
    if ! printf '%s\n' "$out" | grep -q '^ok device \(cuda\|hip\):'; then
        skip "$(printf '%s\n' "$out" | sed -n 's/^ok skip //p' | tr '\n' ';' | sed 's/;$//')"
    fi
    p=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' | tail -n 1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' | tail -n 1)
    [ -n "$f" ] || { f=1; p=0; echo "gpu seed $seed: test_ops crashed or exited $rc"; }
    [ "$rc" -eq 0 ] || status=1
    [ -n "${TQ_COUNTS:-}" ] && echo "$p $f 0" >> "$TQ_COUNTS"
done
exit $status
