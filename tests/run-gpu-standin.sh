#!/bin/sh
# run-gpu-standin.sh TEST_OPS STANDIN_LIB [SEEDS] [SHARE]: the cross-backend op suite on
# the CUDA and HIP backends, through the stand-in driver (tests/standin), once
# for each thread-order seed (default "1 2"): a race or a missing barrier in a
# kernel shows as a difference under one of them. The CUDA and the HIP suite
# run side by side, one process each (the stand-in runs a process's kernels on
# one core, and CI machines have two). Prints "N passed, N failed" for each run
# and appends the counts to $TQ_COUNTS; a backend this build lacks, or a build
# without the stand-in, says why and counts as skipped.
# SHARE=share (the sanitized run): the two slowest groups, simtopk and
# simtopk_same_bits (on the stand-in 100 of the suite's 127 s), run once
# between the two backends, CUDA the one and HIP the other, where each ran
# both: the backends are one source (lib/cuda), and the plain runs check
# both groups on both.
set -u
ops=$1 lib=$2 seeds=${3:-1 2} share=${4:-}
skip() {
    echo "gpu: skipped: $1"
    [ -n "${TQ_COUNTS:-}" ] && echo "0 0 1" >> "$TQ_COUNTS"
    exit 0
}
[ -f "$lib" ] || skip "no stand-in driver at $lib (it needs g++)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
# Seed 2 also hides cuBLAS and rocBLAS: the backends' own matmul kernels then
# serve every product, as on a machine with the driver alone.
for seed in $seeds; do
    blas="$lib"
    [ "$seed" = 2 ] && blas=/nonexistent/libblas-hidden.so
    for dev in cuda hip; do
        leave=
        [ "$share" = share ] && leave=simtopk_same_bits && [ $dev = hip ] && leave=simtopk
        TQ_TEST_SKIP_GROUPS=$leave \
        TQ_STANDIN_SEED=$seed TQ_TEST_DEVICES=$dev TQ_CUDA_DRIVER="$lib" TQ_CUBLAS="$blas" \
            TQ_HIP_RUNTIME="$lib" TQ_ROCBLAS="$blas" "$ops" > "$work/$dev" 2>&1 &
        echo $! > "$work/$dev.pid"
    done
    for dev in cuda hip; do
        wait "$(cat "$work/$dev.pid")"
        echo $? > "$work/$dev.rc"
    done
    for dev in cuda hip; do
        out=$work/$dev rc=$(cat "$work/$dev.rc")
        grep -v '^ok ' "$out" | sed "s/^/gpu $dev seed $seed: /"
        if ! grep -q "^ok device $dev:" "$out" && [ "$rc" -eq 0 ]; then
            echo "gpu $dev: skipped: $(sed -n 's/^ok skip //p' "$out" | tr '\n' ';' | sed 's/;$//')"
            [ -n "${TQ_COUNTS:-}" ] && echo "0 0 1" >> "$TQ_COUNTS"
            continue
        fi
        p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$out" | tail -n 1)
        f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$out" | tail -n 1)
        [ -n "$f" ] || { f=1; p=0; echo "gpu $dev seed $seed: test_ops crashed or exited $rc"; }
        [ "$rc" -eq 0 ] || status=1
        [ -n "${TQ_COUNTS:-}" ] && echo "$p $f 0" >> "$TQ_COUNTS"
    done
done
exit $status
