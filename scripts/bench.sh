#!/usr/bin/env bash
# bench.sh BINDIR: the performance targets of tq, measured against their peers in
# the same run on the same machine. Prints each figure and the ratio to the peer.
# Not a test: these machines are shared and noisy, so nothing here fails a build.
set -euo pipefail
BIN=${1:?usage: bench.sh BINDIR}
export PATH="$BIN:$PATH"
PY=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/bench-peer.sh" # every peer not measured is said and counted

# best of N wall-clock seconds of a shell command
best() {
    local n=$1 cmd=$2 b="" t0 t1 dt
    for _ in $(seq "$n"); do
        t0=$(date +%s.%N); bash -c "$cmd"; t1=$(date +%s.%N)
        dt=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$b" ] || [ "$(echo "$dt < $b" | bc -l)" = 1 ]; then b=$dt; fi
    done
    echo "$b"
}
rate() { echo "scale=2; $1 / $2 / 1000000000" | bc -l; }   # bytes, seconds -> GB/s
ratio() { echo "scale=2; $1 / $2" | bc -l; }

echo "tq bench: $(nproc) cores, $(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -1)"
echo "cpu device: $(tq-cat --list-devices | grep '^cpu')"

# ---- the machine's sgemm rate through the op API: the yardstick of later targets ----
cc -O2 -I"$root/lib" -D_GNU_SOURCE "$root/scripts/sgemm-rate.c" "$root/lib/libtq.a" \
    -lz -ldl -lm -pthread -o "$work/sgemm-rate"
"$work/sgemm-rate" 2048

# ---- stream pass-through, against cat, on a 2 GiB stream ----
"$PY" -c "import numpy as np; np.save('$work/x.npy', np.random.default_rng(0).standard_normal((16384, 1024), dtype=np.float32))"
tq-cat --from npy --as x "$work/x.npy" > "$work/one.tq"
for _ in $(seq 32); do cat "$work/one.tq"; done > "$work/big.tq"
size=$(stat -c %s "$work/big.tq")
cat "$work/big.tq" > /dev/null # warm the page cache
t_cat=$(best 3 "cat '$work/big.tq' > /dev/null")
t_tq=$(best 3 "tq-cat < '$work/big.tq' > /dev/null")
t_cat2=$(best 3 "cat '$work/big.tq' | cat > /dev/null")
t_tq2=$(best 3 "tq-cat < '$work/big.tq' | tq-cat > /dev/null")
printf 'pass-through %s MB: cat %s GB/s, tq-cat %s GB/s, ratio %s (target >= 0.80)\n' \
    $((size / 1000000)) "$(rate "$size" "$t_cat")" "$(rate "$size" "$t_tq")" "$(ratio "$t_cat" "$t_tq")"
printf 'piped        %s MB: cat|cat %s GB/s, tq-cat|tq-cat %s GB/s, ratio %s (target >= 0.80)\n' \
    $((size / 1000000)) "$(rate "$size" "$t_cat2")" "$(rate "$size" "$t_tq2")" "$(ratio "$t_cat2" "$t_tq2")"
rm -f "$work/big.tq"

# ---- .npy import and export ----
"$PY" -c "import numpy as np; np.save('$work/y.npy', np.random.default_rng(1).standard_normal((131072, 2048), dtype=np.float32))"
nbytes=$((131072 * 2048 * 4))
cat "$work/y.npy" > /dev/null
t_imp=$(best 3 "tq-cat --from npy --as y '$work/y.npy' > /dev/null")
tq-cat --from npy --as y "$work/y.npy" > "$work/y.tq"
t_exp=$(best 3 "tq-cat --to npy -o '$work/out.npy' '$work/y.tq'")
cmp -s <(tail -c "$nbytes" "$work/y.npy") <(tail -c "$nbytes" "$work/out.npy") || echo "warning: npy export differs from its input"
printf 'npy import %s MB: %s GB/s (target >= 1)\n' $((nbytes / 1000000)) "$(rate "$nbytes" "$t_imp")"
printf 'npy export %s MB: %s GB/s (target >= 1)\n' $((nbytes / 1000000)) "$(rate "$nbytes" "$t_exp")"
bash "$root/scripts/bench-embed.sh" "$BIN"
bash "$root/scripts/bench-encoders.sh" "$BIN"
bash "$root/scripts/bench-simmat.sh" "$BIN"

# ---- attention (issue 4): tq-attend against PyTorch eager ----
bash "$root/scripts/bench-attend.sh" "$BIN"

# ---- GPUs (issue 12): GEMM, top-10, attention and tq-embed against PyTorch
# on each CUDA and HIP device (said, not skipped, where there is none) ----
bash "$root/scripts/bench-gpu.sh" "$BIN"

# ---- tq-bench (issue 15): every op on every device against the ceilings measured here ----
# the op table itself; the peers above are the comparisons
"$BIN/tq-bench" --device all --progress never


# ---- training (issue 14): tq-train against scikit-learn and PyTorch ----
bash "$root/scripts/bench-train.sh" "$BIN"

# ---- quantized vectors (issue 13): tq-quantize against NumPy, binary and int8
# search against FAISS ----
bash "$root/scripts/bench-quantize.sh" "$BIN"

bench_summary
