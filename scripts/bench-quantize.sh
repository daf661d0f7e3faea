#!/usr/bin/env bash
# bench-quantize.sh BINDIR [SCALE]: tq-quantize and the quantized searches of
# tq-simmat against their peers, in one run on this machine, all cores. Not a
# test: targets are reported, never enforced, since shared machines are noisy.
# SCALE (default 1) divides the database rows of the two searches, for small
# machines; the output says which sizes ran.
#   quantize    100,000 x 384 f32 (153.6 MB) from a file to /dev/null, the whole
#               tool, per code (int8, q4_0, bit), and back (--to f32), against
#               NumPy doing the same in memory (int8 per row and its inverse,
#               q4_0 as gguf.quants does it, numpy.packbits). Target: >= 5x.
#   binary      top-10 of 1,000 queries in 1,000,000 x 1024-bit codes: the
#               whole tool against FAISS IndexBinaryFlat.search alone (the
#               faiss-cpu wheel of .venv and Debian's python3-faiss). Target:
#               >= 2x both.
#   int8        top-10 of 1,000 queries in 1,000,000 x 384 int8 rows: against
#               tq's own f32 search of the same rows (target >= 2.5x) and FAISS
#               IndexScalarQuantizer QT_8bit, inner product (target: faster).
#   q8_0, q4_0  top-10 of the same queries in the same rows as ggml's blocks,
#               against the f32 search (reported, no target).
#   near-dup    every pair at cosine >= 0.9 among 50,000 x 384 f32 rows (unit
#               rows in clusters of near-duplicates: 5,000 centres plus noise
#               of 0.2-0.8 times their size): tq-simmat --threshold 0.9, the
#               whole tool (its int8 screen, then exact scores), against FAISS
#               IndexFlatIP.range_search of the rows against themselves (the
#               faiss-cpu wheel), the same pairs. Target: under 3 s. And
#               --dedup 0.9 of the same rows (reported).
#   scorers     bench-qmodel.sh: a tq-train MLP in int8, q8_0, q4_0, bf16 against
#               the f32 model: sizes, tq-score rate, decisions.
#   recall      bench-recall.sh: recall@10 against f32 of bit, q2, q4_0, int8 on
#               all-MiniLM-L6-v2 embeddings (with --rescore), and their rates.
set -euo pipefail
BIN=${1:?usage: bench-quantize.sh BINDIR [SCALE]}
SCALE=${2:-1}
export PATH="$BIN:$PATH"
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-bench-quantize.XXXXXX")
trap 'rm -rf "$work"' EXIT
threads=$(nproc)
NPY=/usr/bin/python3
[ -x "$root/.venv/bin/python" ] && NPY=$root/.venv/bin/python

best3() { # best wall seconds of 3 runs of a shell command
    local b="" t0 t1 dt
    for _ in 1 2 3; do
        t0=$(date +%s.%N); bash -c "$1"; t1=$(date +%s.%N)
        dt=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$b" ] || [ "$(echo "$dt < $b" | bc -l)" = 1 ]; then b=$dt; fi
    done
    echo "$b"
}
ratio() { echo "scale=2; $1 / $2" | bc -l; }
rate() { echo "scale=2; $1 / $2 / 1000000000" | bc -l; } # bytes, seconds -> GB/s

echo "== tq-quantize and quantized search ($threads threads, database rows / $SCALE)"

# ---- quantize and dequantize 100,000 x 384 ----
"$NPY" -c "import numpy as np; np.save('$work/x.npy', np.random.default_rng(0).standard_normal((100000, 384), dtype=np.float32) * np.float32(0.05))"
tq-cat --from npy --as emb --batch 100000 "$work/x.npy" > "$work/x.tq"
nbytes=$((100000 * 384 * 4))
PYTHONPATH="$root/tests/lib" "$NPY" - "$work" > "$work/numpy.txt" <<'PY'
import sys, time, numpy as np
import quantref as r
x = np.load(sys.argv[1] + "/x.npy")
def best(f):
    b = 1e30
    for _ in range(3):
        t0 = time.perf_counter(); f(); b = min(b, time.perf_counter() - t0)
    return b
q, s = r.int8_row(x)
print("int8", best(lambda: r.int8_row(x)))
print("int8-back", best(lambda: q.astype(np.float32) * s[:, None]))
try:
    from gguf import quants, GGMLQuantizationType as T
    q4 = lambda: quants.quantize(x, T.Q4_0)
    print("q4_0", best(q4))
    b4 = quants.quantize(x, T.Q4_0)
    print("q4_0-back", best(lambda: quants.dequantize(b4, T.Q4_0)))
except ImportError:
    print("q4_0", best(lambda: r.q4_0(x)))
b = np.packbits(x > 0, axis=-1)
print("bit", best(lambda: np.packbits(x > 0, axis=-1)))
print("bit-back", best(lambda: np.unpackbits(b, axis=-1).astype(np.float32) * 2 - 1))
PY
cat "$work/x.tq" > /dev/null
for c in int8 q4_0 bit; do
    t_np=$(sed -n "s/^$c //p" "$work/numpy.txt")
    t_tq=$(best3 "tq-quantize --threads $threads --to $c '$work/x.tq' > '$work/c.tq'")
    printf 'quantize %-5s 153.6 MB: tq-quantize %s GB/s, NumPy in memory %s GB/s, ratio %s (target >= 5)\n' \
        "$c" "$(rate $nbytes "$t_tq")" "$(rate $nbytes "$t_np")" "$(ratio "$t_np" "$t_tq")"
    t_np=$(sed -n "s/^$c-back //p" "$work/numpy.txt")
    t_tq=$(best3 "tq-quantize --threads $threads --to f32 '$work/c.tq' > /dev/null")
    [ -n "$t_np" ] && printf 'back     %-5s to f32: tq-quantize %s GB/s, NumPy in memory %s GB/s, ratio %s (target >= 5)\n' \
        "$c" "$(rate $nbytes "$t_tq")" "$(rate $nbytes "$t_np")" "$(ratio "$t_np" "$t_tq")"
done

# ---- binary top-10 ----
ndb=$((1000000 / SCALE))
"$NPY" - "$work" "$ndb" <<'PY'
import sys, numpy as np
w, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(1)
np.save(w + "/b.npy", rng.integers(0, 256, (n, 128), dtype=np.uint8))
np.save(w + "/bq.npy", rng.integers(0, 256, (1000, 128), dtype=np.uint8))
PY
PYTHONPATH="$root/tests/lib" "$NPY" -c "
import numpy as np, tqstream as t
for n in ('b', 'bq'):
    a = np.load('$work/' + n + '.npy')
    open('$work/' + n + '.tq', 'wb').write(t.frame('emb', 'bit', [a.shape[0], 1024], a.tobytes()))"
t_tq=$(best3 "tq-simmat --threads $threads --db '$work/b.tq' --metric hamming -k 10 < '$work/bq.tq' > /dev/null")
faiss_bin() { # PYTHON: best of 3 IndexBinaryFlat searches, or "-"
    "$1" - "$work" "$threads" <<'PY' 2>/dev/null || echo "-"
import sys, time, numpy as np, faiss
w, t = sys.argv[1], int(sys.argv[2])
faiss.omp_set_num_threads(t)
x, q = np.load(w + "/b.npy"), np.load(w + "/bq.npy")
ix = faiss.IndexBinaryFlat(1024); ix.add(x)
best = 1e30
for _ in range(3):
    t0 = time.perf_counter(); ix.search(q, 10); best = min(best, time.perf_counter() - t0)
print(best)
PY
}
for py in "$root/.venv/bin/python" /usr/bin/python3; do
    [ -x "$py" ] || continue
    t_f=$(faiss_bin "$py")
    [ "$t_f" = "-" ] && { echo "binary top-10: FAISS not importable by $py"; continue; }
    printf 'binary top-10, %d x 1024 bits, 1000 queries: tq-simmat %.3f s, FAISS IndexBinaryFlat (%s) %.3f s, ratio %s (target >= 2)\n' \
        "$ndb" "$t_tq" "$py" "$t_f" "$(ratio "$t_f" "$t_tq")"
done

# ---- int8 top-10 ----
"$NPY" - "$work" "$ndb" <<'PY'
import sys, numpy as np
w, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(2)
def unit(m):
    x = rng.standard_normal((m, 384), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)
np.save(w + "/e.npy", unit(n)); np.save(w + "/eq.npy", unit(1000))
PY
tq-cat --from npy --as emb --batch 100000 "$work/e.npy" > "$work/e.tq"
tq-cat --from npy --as emb "$work/eq.npy" > "$work/eq.tq"
tq-quantize --to int8 "$work/e.tq" > "$work/e8.tq"
tq-quantize --to int8 "$work/eq.tq" > "$work/eq8.tq"
t_8=$(best3 "tq-simmat --threads $threads --db '$work/e8.tq' --metric dot -k 10 < '$work/eq8.tq' > /dev/null")
t_32=$(best3 "tq-simmat --threads $threads --db '$work/e.tq' --metric dot -k 10 < '$work/eq.tq' > /dev/null")
printf 'int8 top-10, %d x 384, 1000 queries: tq-simmat int8 %.3f s, tq-simmat f32 %.3f s, ratio %s (target >= 2.5)\n' \
    "$ndb" "$t_8" "$t_32" "$(ratio "$t_32" "$t_8")"
t_sq=$("$NPY" - "$work" "$threads" <<'PY' 2>/dev/null || echo "-"
import sys, time, numpy as np, faiss
w, t = sys.argv[1], int(sys.argv[2])
faiss.omp_set_num_threads(t)
x, q = np.load(w + "/e.npy"), np.load(w + "/eq.npy")
ix = faiss.IndexScalarQuantizer(384, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
ix.train(x); ix.add(x)
best = 1e30
for _ in range(3):
    t0 = time.perf_counter(); ix.search(q, 10); best = min(best, time.perf_counter() - t0)
print(best)
PY
)
[ "$t_sq" != "-" ] && printf 'int8 top-10: FAISS IndexScalarQuantizer QT_8bit %.3f s, ratio %s (target > 1)\n' \
    "$t_sq" "$(ratio "$t_sq" "$t_8")"
# ---- q8_0 and q4_0 top-10: ggml's block dot products, the same rows ----
for c in q8_0 q4_0; do
    tq-quantize --to "$c" "$work/e.tq" > "$work/e_$c.tq"
    t_c=$(best3 "tq-simmat --threads $threads --db '$work/e_$c.tq' --metric dot -k 10 < '$work/eq.tq' > /dev/null")
    printf '%s top-10, %d x 384, 1000 float queries (quantized to q8_0): tq-simmat %.3f s, tq-simmat f32 %.3f s, ratio %s (no target)\n' \
        "$c" "$ndb" "$t_c" "$t_32" "$(ratio "$t_32" "$t_c")"
done
# ---- near-duplicate pairs: the int8 screen of --threshold ----
"$NPY" - "$work" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(7)
c = rng.standard_normal((5000, 384), dtype=np.float32)
x = c[rng.integers(0, 5000, 50000)]
x += rng.uniform(0.2, 0.8, (50000, 1)).astype(np.float32) * rng.standard_normal((50000, 384), dtype=np.float32)
x /= np.linalg.norm(x, axis=1, keepdims=True)
np.save(sys.argv[1] + "/nd.npy", x)
PY
tq-cat --from npy --as emb "$work/nd.npy" > "$work/nd.tq"
t_nd=$(best3 "tq-simmat --threads $threads --threshold 0.9 < '$work/nd.tq' > '$work/nd_pairs.tq'")
tq-simmat -v --threads "$threads" --threshold 0.9 < "$work/nd.tq" 2>&1 >/dev/null | sed -n 's/^tq-simmat: \([0-9]* pairs;.*\)/  (\1)/p'
tq-cat --to npy --name i -o "$work/nd_i.npy" "$work/nd_pairs.tq" 2>/dev/null
tq-cat --to npy --name j -o "$work/nd_j.npy" "$work/nd_pairs.tq" 2>/dev/null
printf 'near-duplicate pairs >= 0.9, 50000 x 384: tq-simmat --threshold %.3f s (target < 3 s)\n' "$t_nd"
t_dd=$(best3 "tq-simmat --threads $threads --dedup 0.9 < '$work/nd.tq' > /dev/null")
printf 'near-duplicate removal at 0.9, the same rows: tq-simmat --dedup %.3f s (the same screen; no target)\n' "$t_dd"
if ! "$NPY" - "$work" "$threads" "$t_nd" <<'PY' 2>"$work/faiss_nd.err"
import sys, time, numpy as np, faiss
w, t, tq = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
faiss.omp_set_num_threads(t)
x = np.load(w + "/nd.npy")
ix = faiss.IndexFlatIP(384); ix.add(x)
t0 = time.perf_counter(); lims, D, I = ix.range_search(x, 0.9); dt = time.perf_counter() - t0
q = np.repeat(np.arange(len(x)), np.diff(lims.astype(np.int64)))
theirs = {(a, b) for a, b in zip(q.tolist(), I.tolist()) if a < b}
ours = set(zip(np.load(w + "/nd_i.npy").tolist(), np.load(w + "/nd_j.npy").tolist()))
print("near-duplicate pairs: FAISS %s IndexFlatIP.range_search %.3f s, tq is %.2fx as fast; "
      "%d pairs, FAISS %d, %d not in both (scores within f32 rounding of 0.9)"
      % (faiss.__version__, dt, dt / tq, len(ours), len(theirs), len(ours ^ theirs)))
PY
then
    echo "near-duplicate pairs: FAISS not measured ($NPY: $(tail -n 1 "$work/faiss_nd.err"))"
fi

# ---- quantized scorers: sizes, scoring rate and decisions against the f32 model ----
bash "$root/scripts/bench-qmodel.sh" "$BIN" "$SCALE"

# ---- recall@10 of bit, q2, q4_0, int8 on real embeddings, and their search rates ----
bash "$root/scripts/bench-recall.sh" "$BIN" "$SCALE"
