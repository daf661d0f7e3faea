#!/usr/bin/env bash
# bench-qmodel.sh BINDIR [SCALE]: quantized scorers (tq-quantize on a tq-train
# model, tq-score -m on it) against the f32 model, in one run on this
# machine: the file sizes, the scoring rate of 200,000 / SCALE rows of 384
# values (best of 3, the whole tool) and the decisions (the argmax of 10
# classes) equal to the f32 model's, for an MLP 384-256-10 trained on the
# same rows. Targets (tq-score(1)): int8 <= 0.27x the f32 file, q4_0 <= 0.16x;
# decisions equal on >= 99.5%; scoring at least the f32 model's rate.
# Reported, never enforced, as bench-quantize.sh's figures.
set -euo pipefail
BIN=${1:?usage: bench-qmodel.sh BINDIR [SCALE]}
SCALE=${2:-1}
export PATH="$BIN:$PATH"
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-bench-qmodel.XXXXXX")
trap 'rm -rf "$work"' EXIT
NPY=/usr/bin/python3
[ -x "$root/.venv/bin/python" ] && NPY=$root/.venv/bin/python
n=$((200000 / SCALE))

best3() {
    local b="" t0 t1 dt
    for _ in 1 2 3; do
        t0=$(date +%s.%N); bash -c "$1"; t1=$(date +%s.%N)
        dt=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$b" ] || [ "$(echo "$dt < $b" | bc -l)" = 1 ]; then b=$dt; fi
    done
    echo "$b"
}

echo "== quantized scorers: MLP 384-256-10, $n rows of 384 scored"
PYTHONPATH="$root/tests/lib" "$NPY" - "$work" "$n" <<'PY'
import sys, numpy as np, tqstream as ts
w, n = sys.argv[1], int(sys.argv[2])
r = np.random.default_rng(5)
# features of unequal scales (as embeddings joined with counts), 10 classes
# by a random linear rule: a model worth standardizing
x = (r.standard_normal((n, 384)) * np.exp(r.uniform(-2, 2, 384))).astype(np.float32)
y = (x / np.exp(r.uniform(-2, 2, 384)) @ r.standard_normal((384, 10))).argmax(1).astype(np.int64)
open(w + "/x.tq", "wb").write(ts.array_frame("emb", x) + ts.array_frame("y", y))
m = min(n, 20000)
open(w + "/train.tq", "wb").write(ts.array_frame("emb", x[:m]) + ts.array_frame("y", y[:m]))
PY
tq-train --model mlp --hidden 256 --output softmax --standardize --epochs 5 -o "$work/m.tq" "$work/train.tq" 2>/dev/null ||
    tq-train --model mlp --hidden 256 --standardize --epochs 5 -o "$work/m.tq" "$work/train.tq"
f32=$(stat -c %s "$work/m.tq")
t32=$(best3 "tq-score -m '$work/m.tq' '$work/x.tq' > /dev/null")
printf 'f32   model %7d bytes (1.00x); tq-score %.3f s, %.0f rows/s\n' "$f32" "$t32" "$(echo "$n / $t32" | bc -l)"
for c in int8 q8_0 q4_0 bf16; do
    tq-quantize --to "$c" -o "$work/m_$c.tq" "$work/m.tq"
    sz=$(stat -c %s "$work/m_$c.tq")
    for p in auto int8; do
        [ "$p" = int8 ] && [ "$c" != int8 ] && continue
        t=$(best3 "tq-score --precision $p -m '$work/m_$c.tq' '$work/x.tq' > /dev/null")
        agree=$(PYTHONPATH="$root/tests/lib" "$NPY" - "$work/m.tq" "$work/m_$c.tq" "$work/x.tq" "$p" <<'PY'
import sys, numpy as np, qmodel_ref as q
x = q.rows(sys.argv[3], "emb")[:20000]
pf, _ = q.forward(sys.argv[1], x)
pq, _ = q.forward(sys.argv[2], x, sys.argv[4] == "int8")
print("%.4f" % (pf.argmax(1) == pq.argmax(1)).mean())
PY
)
        printf '%-5s model %7d bytes (%.3fx); tq-score --precision %-4s %.3f s, %.2fx the f32 rate; decisions equal %s of 20000 rows\n' \
            "$c" "$sz" "$(echo "$sz / $f32" | bc -l)" "$p" "$t" "$(echo "$t32 / $t" | bc -l)" "$agree"
    done
done
