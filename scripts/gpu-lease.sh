#!/usr/bin/env bash
# gpu-lease.sh pack|run: a lent GPU machine's quarter hour in one command.
# The machine is bare and its time scarce, so nothing is built there: `pack`
# (here, after `make all` and the test binaries) puts the stripped tools, the
# test binaries and tools, libtq.a (bench-gpu.sh compiles gpu-topk.c against
# it) and Bats with its two libraries into .gpu-lease/pack.tar.xz (about 10
# MiB: every tool holds the same GPU image, which xz's window shares) and
# gpu-topk (scripts/bench-gpu.sh's, built here: zlib's headers may be missing
# there); `run`
# (there, in the repository's root, with .gpu-lease carried) unpacks them and
# runs `make gpu-check`'s script on the steps named by TQ_GPU_CHECK_STEPS
# (default: devices ops check bats sanitizer bench) within TQ_GPU_CHECK_BUDGET
# seconds (default 420), then copies the report, the logs and the bench
# figures to $OUT (the device tool's folder that comes back).
#   here:  make -j2 all tests tools && scripts/gpu-lease.sh pack
#   there: bash scripts/gpu-lease.sh run   (carry .gpu-lease)
# The PyTorch peer is the machine's own python3 (TQ_BENCH_GPU_PY); the BERT
# figures need the all-MiniLM-L6-v2 folder, which is over what a call
# carries, so they say "not measured" there.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
dir=.gpu-lease
case ${1:-} in
pack)
    mkdir -p "$dir"
    grep -qx "/$dir/" .git/info/exclude 2> /dev/null || echo "/$dir/" >> .git/info/exclude
    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' EXIT
    mkdir -p "$stage/tree/bin" "$stage/tree/build/tests" "$stage/tree/build/tools" "$stage/tree/lib" \
        "$stage/bats/usr/bin" "$stage/bats/usr/lib" "$stage/bats/usr/libexec"
    for f in bin/tq-*; do strip -o "$stage/tree/$f" "$f" || exit 1; done
    for f in build/tests/test_* build/tools/*; do
        case $f in *.d | *.o) continue ;; esac
        [ -x "$f" ] && { strip -o "$stage/tree/$f" "$f" 2> /dev/null || cp "$f" "$stage/tree/$f"; }
    done
    cp lib/libtq.a "$stage/tree/lib/" || exit 1
    cc -O2 -Ilib scripts/gpu-topk.c lib/libtq.a -lz -ldl -lm -pthread -o "$stage/tree/build/tools/gpu-topk" &&
        strip "$stage/tree/build/tools/gpu-topk" || exit 1
    cp /usr/bin/bats "$stage/bats/usr/bin/" && cp -r /usr/lib/bats /usr/lib/bats-core "$stage/bats/usr/lib/" &&
        cp -r /usr/libexec/bats-core "$stage/bats/usr/libexec/" || exit 1
    tar -C "$stage" -cf - tree bats | xz -9e -T2 > "$dir/pack.tar.xz" || exit 1
    echo "gpu-lease: $dir/pack.tar.xz, $(du -h "$dir/pack.tar.xz" | cut -f1); carry $dir"
    ;;
run)
    t0=$(date +%s)
    out=${OUT:-/tmp/gpu-lease-out}
    mkdir -p "$out"
    xz -dc "$dir/pack.tar.xz" | tar -C /tmp -xf - || { echo "gpu-lease: unpack failed"; exit 1; }
    cp -a /tmp/tree/. . && cp -a /tmp/bats/usr/. /usr/ || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$out/gpu.txt"
    # cuBLAS where the loader does not know it: the toolkit's, or a wheel's
    if ! ldconfig -p | grep -q 'libcublas\.so\.1[23]'; then
        cb=$(find /usr/local/cuda*/ /opt /usr/lib -name 'libcublas.so.1[23]' 2> /dev/null | head -n 1)
        [ -n "$cb" ] && export TQ_CUBLAS=$cb && echo "gpu-lease: TQ_CUBLAS=$cb"
    fi
    export TQ_BENCH_GPU_PY=${TQ_BENCH_GPU_PY:-$(command -v python3)} TQ_GPU_TOPK=$root/build/tools/gpu-topk
    export TQ_GPU_CHECK_STEPS=${TQ_GPU_CHECK_STEPS:-devices ops check bats sanitizer bench}
    export TQ_GPU_CHECK_BUDGET=${TQ_GPU_CHECK_BUDGET:-420}
    TQ_BIN=$root/bin bash scripts/gpu-check.sh
    rc=$?
    tar -C build -czf "$out/gpu-check.tar.gz" gpu-check 2> /dev/null
    cp build/gpu-check/report.md "$out/" 2> /dev/null
    echo "gpu-lease: gpu-check exit $rc after $(($(date +%s) - t0)) s"
    exit $rc
    ;;
*)
    echo "usage: gpu-lease.sh pack|run" >&2
    exit 2
    ;;
esac
