#!/usr/bin/env bash
# bench-attend.sh BINDIR: the tq-attend target of issue 4. Self-attention, one
# sequence, n = 4096, 8 heads, d_head = 64, fp32, with and without the causal
# mask: tq-attend (the whole tool, reading and writing its stream) against the
# same computation in PyTorch eager mode (softmax(Q K^T / sqrt(d)) V per head,
# compute only), same machine and thread count, best of 3. Also the achieved
# GFLOP/s as a fraction of the sgemm rate measured in this run (4 n^2 d flops,
# half of it under the causal mask). Noisy machines: a report, not a test.
set -euo pipefail
BIN=${1:?usage: bench-attend.sh BINDIR}
export PATH="$BIN:$PATH"
PY=/usr/bin/python3
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-bench-attend.XXXXXX")
trap 'rm -rf "$work"' EXIT
threads=$(nproc)
n=4096 d=512 heads=8

. "$root/scripts/bench-peer.sh"
why=$(py_why "$PY" torch)
if [ -n "$why" ]; then
    not_measured "PyTorch (attention peer, and tq-attend with it)" "$why (apt-get install python3-torch)"
    bench_summary
    exit 0
fi
cc -O2 -I"$root/lib" -D_GNU_SOURCE "$root/scripts/sgemm-rate.c" "$root/lib/libtq.a" \
    -lz -ldl -lm -pthread -o "$work/sgemm-rate"
sgemm=$("$work/sgemm-rate" 2048 "$threads" | sed -n 's/.*OpenBLAS: \([0-9.]*\) GFLOP.*/\1/p')
[ -n "$sgemm" ] || sgemm=$("$work/sgemm-rate" 2048 "$threads" | sed -n 's/.*built-in: \([0-9.]*\) GFLOP.*/\1/p')

PYTHONPATH="$root/tests/lib" "$PY" -c "
import numpy as np, sys, tqstream as tq
x = np.random.default_rng(0).uniform(-1, 1, ($n, $d)).astype(np.float32)
sys.stdout.buffer.write(tq.array_frame('emb', x))" > "$work/x.tq"

best() { # best of 3 wall-clock seconds of a command reading $work/x.tq
    local b="" t0 t1 dt
    for _ in 1 2 3; do
        t0=$(date +%s.%N); "$@" < "$work/x.tq" > /dev/null; t1=$(date +%s.%N)
        dt=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$b" ] || [ "$(echo "$dt < $b" | bc -l)" = 1 ]; then b=$dt; fi
    done
    echo "$b"
}

for causal in 0 1; do
    flag=$([ $causal = 1 ] && echo --causal || true)
    t_tq=$(best tq-attend --self --heads $heads --threads "$threads" $flag -o "$work/o.tq")
    t_pt=$("$PY" - "$n" "$heads" "$causal" "$threads" <<'PYEOF'
import sys, time, torch
n, H, causal, threads = map(int, sys.argv[1:])
torch.set_num_threads(threads)
dh = 64
x = torch.rand(n, H * dh) * 2 - 1
mask = torch.triu(torch.ones(n, n, dtype=torch.bool), 1) if causal else None
def run():
    q = x.view(n, H, dh).transpose(0, 1)          # Q = K = V, per head
    s = q @ q.transpose(1, 2) / dh ** 0.5
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return (torch.softmax(s, -1) @ q).transpose(0, 1).reshape(n, H * dh)
run()
best = 1e9
for _ in range(3):
    t = time.perf_counter(); run(); best = min(best, time.perf_counter() - t)
print(best)
PYEOF
)
    [ -s "$work/o.tq" ] || { echo "attention: tq-attend wrote no output" >&2; exit 1; }
    flops=$(echo "4 * $n * $n * $d / (1 + $causal)" | bc)
    gf=$(echo "scale=1; $flops / $t_tq / 1000000000" | bc -l)
    printf 'attention n=%d heads=%d d_head=64%s: tq %.3f s (%s GFLOP/s, %.2f of sgemm %s), PyTorch %.3f s: %.2fx (target >= 2)\n' \
        $n $heads "$([ $causal = 1 ] && echo ' causal' || true)" "$t_tq" "$gf" \
        "$(echo "$gf / $sgemm" | bc -l)" "$sgemm" "$t_pt" "$(echo "$t_pt / $t_tq" | bc -l)"
done
bench_summary
