#!/usr/bin/env bats
# tq-simmat over tq-quantize's codes: int8 top-k against exact rational
# scores (each score the correctly rounded f32 of dot x scale_q x scale_x),
# Hamming top-k against NumPy and FAISS IndexBinaryFlat, determinism, shards
# and bad input.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    py "$TESTS_DIR/lib/quantref.py" make db.tq 1 400 64 150 0.05
    py "$TESTS_DIR/lib/quantref.py" make q.tq 2 45 64 20 0.05
}

# codes.py: the reference side, shared by the tests below.
ref() {
    cat > codes.py <<'EOF'
import sys
from fractions import Fraction
import numpy as np
import tqstream as t

def frames(path):
    return t.read(open(path, "rb").read())

def rows(path, name):
    def arr(f):  # bit rows as their packed bytes
        if f["dtype"] == "bit":
            return np.frombuffer(f["raw"], np.uint8).reshape(f["dims"][0], -1)
        return t.to_numpy(f)
    return np.concatenate([arr(f) for f in frames(path) if f["name"] == name])

def f32_nearest(fr):
    """The f32 nearest the rational fr, ties to even: from the neighbours of a
    close f32 (a float64 is within 2^-29 relative of fr)."""
    f = np.float32(float(fr))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - fr), int(np.float32(c).view(np.uint32)) & 1))
    return np.float32(best)

def topk(score, k):
    """Rank each row: larger first, ties to the lower index."""
    n = score.shape[1]
    order = np.lexsort((np.broadcast_to(np.arange(n), score.shape), -score), axis=1)[:, :k]
    sc = np.take_along_axis(score, order, 1)
    pad = k - order.shape[1]  # k beyond the database: empty slots, -1 and -inf
    return (np.pad(order, ((0, 0), (0, pad)), constant_values=-1),
            np.pad(sc, ((0, 0), (0, pad)), constant_values=-np.inf).astype(np.float32))

def check(out, idx_want, sc_want):
    fr = frames(out)
    idx = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "idx"])
    sc = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "score"])
    assert np.array_equal(sc, sc_want), np.argwhere(sc != sc_want)[:5]
    assert np.array_equal(idx, idx_want), np.argwhere(idx != idx_want)[:5]

cmd = sys.argv[1]
if cmd == "int8":
    out, qp, dp, k = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    q, qs = rows(qp, "emb").astype(np.int64), rows(qp, "emb_scale")
    x, xs = rows(dp, "emb").astype(np.int64), rows(dp, "emb_scale")
    dots = q @ x.T
    score = np.empty(dots.shape, np.float32)
    for i in range(dots.shape[0]):
        for j in range(dots.shape[1]):
            score[i, j] = f32_nearest(Fraction(int(dots[i, j])) * Fraction(float(qs[i])) * Fraction(float(xs[j])))
    check(out, *topk(score, k))
elif cmd == "bit":
    out, qp, dp, k = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    q, x = np.unpackbits(rows(qp, "emb"), axis=1), np.unpackbits(rows(dp, "emb"), axis=1)
    dist = (q[:, None, :] != x[None, :, :]).sum(axis=2)
    check(out, *topk(-dist.astype(np.float32), k))
EOF
}

@test "int8 top-k: each score the f32 nearest dot x both scales, exact ranking" {
    ref
    tq-quantize --to int8 < db.tq > db8.tq
    tq-quantize --to int8 < q.tq > q8.tq
    tq-simmat --db db8.tq --metric dot -k 7 < q8.tq > out.tq
    py codes.py int8 out.tq q8.tq db8.tq 7
    # the query stream's other frames pass through; its scales are consumed
    run tq-cat --info < out.tq
    [[ "$output" == *note* ]] && [[ "$output" != *emb_scale* ]]
}

@test "bit top-k by Hamming distance: NumPy's distances and ranking, keys carried" {
    ref
    tq-quantize --to bit < db.tq > db1.tq
    tq-quantize --to bit < q.tq > q1.tq
    tq-simmat --db db1.tq --metric hamming -k 9 < q1.tq > out.tq
    py codes.py bit out.tq q1.tq db1.tq 9
    tq-cat -t tsv --name db_key < out.tq | sed -n 2p | grep -q '^row'
    # k beyond the database: empty slots
    py "$TESTS_DIR/lib/quantref.py" make small.tq 3 5 64 5 0.05
    tq-quantize --to bit < small.tq > small1.tq
    tq-simmat --db small1.tq --metric hamming -k 8 < q1.tq > out.tq
    py codes.py bit out.tq q1.tq small1.tq 8
}

@test "same bytes whatever the threads and query batches; shards merge to one run" {
    tq-quantize --to int8 < db.tq > db8.tq
    tq-quantize --to bit < db.tq > db1.tq
    for m in "int8 dot" "bit hamming"; do
        set -- $m
        tq-quantize --to "$1" < q.tq > qc.tq
        tq-simmat --db "db$([ "$1" = int8 ] && echo 8 || echo 1).tq" --metric "$2" -k 5 --threads 1 < qc.tq > a.tq
        tq-simmat --db "db$([ "$1" = int8 ] && echo 8 || echo 1).tq" --metric "$2" -k 5 --threads 2 < qc.tq > b.tq
        cmp a.tq b.tq
        for i in 0 1 2; do
            tq-simmat --db "db$([ "$1" = int8 ] && echo 8 || echo 1).tq" --metric "$2" -k 5 --shard "$i/3" < qc.tq > "s$i.tq"
        done
        tq-simmat --merge s1.tq s0.tq s2.tq > m.tq
        cmp a.tq m.tq
    done
    # the queries in other batches: the same lists
    py "$TESTS_DIR/lib/quantref.py" make q7.tq 2 45 64 7 0.05
    tq-quantize --to bit < q7.tq | tq-simmat --db db1.tq --metric hamming -k 5 | tq-cat -t tsv --name idx,score > c.tsv
    tq-cat -t tsv --name idx,score < a.tq > a.tsv
    diff a.tsv c.tsv
}

@test "FAISS IndexBinaryFlat finds the same neighbours at the same distances" {
    PYF=""
    for p in "$ROOT_DIR/.venv/bin/python" /usr/bin/python3; do
        "$p" -c 'import faiss' 2>/dev/null && { PYF=$p; break; }
    done
    [ -n "$PYF" ] || skip "faiss is not installed (python3-faiss, or faiss-cpu in .venv)"
    "$PYF" -c '
import numpy as np, tqstream as t
rng = np.random.default_rng(5)
x = rng.integers(0, 256, (20000, 32), dtype=np.uint8); q = rng.integers(0, 256, (200, 32), dtype=np.uint8)
np.save("x.npy", x); np.save("q.npy", q)
open("x.tq","wb").write(t.frame("emb", "bit", [20000, 256], x.tobytes()))
open("q.tq","wb").write(t.frame("emb", "bit", [200, 256], q.tobytes()))'
    tq-simmat --db x.tq --metric hamming -k 10 < q.tq > out.tq
    "$PYF" -c '
import numpy as np, faiss, tqstream as t
x, q = np.load("x.npy"), np.load("q.npy")
ix = faiss.IndexBinaryFlat(256); ix.add(x); D, I = ix.search(q, 10)
fr = t.read(open("out.tq","rb").read())
idx = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "idx"])
sc = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "score"])
# the same distances rank by rank; the rows may differ only within a tie
assert np.array_equal(-sc, D), np.argwhere(-sc != D)[:5]
bad = [(i, r) for i in range(len(q)) for r in range(10) if I[i, r] != idx[i, r] and
       not (np.sum(D[i] == D[i, r]) > 1)]
assert not bad, bad[:5]'
}

@test "bad input: codes and metrics that do not match, scales missing" {
    tq-quantize --to int8 < db.tq > db8.tq
    tq-quantize --to bit < db.tq > db1.tq
    tq-quantize --to bit < q.tq > q1.tq
    run --separate-stderr tq-simmat --db db8.tq -k 3 < q.tq
    [ "$status" -eq 2 ] && [[ "$stderr" == *"--metric dot"* ]]
    run --separate-stderr tq-simmat --db db1.tq -k 3 < q1.tq
    [ "$status" -eq 2 ] && [[ "$stderr" == *"hamming"* ]]
    run --separate-stderr tq-simmat --db db.tq --metric hamming -k 3 < q.tq
    [ "$status" -eq 2 ]
    run --separate-stderr tq-simmat --db db1.tq --metric hamming < q1.tq
    [ "$status" -eq 2 ] && [[ "$stderr" == *"--topk"* ]]
    # queries of another kind than the database, int8 queries without scales
    run --separate-stderr tq-simmat --db db8.tq --metric dot -k 3 < q1.tq
    [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    tq-quantize --to int8 < q.tq | py -c '
import sys, tqstream as t
fr = t.read(sys.stdin.buffer.read())
sys.stdout.buffer.write(b"".join(t.frame(f["name"], f["dtype"], f["dims"], f["raw"], meta=f["meta"])
                                 for f in fr if f["name"] != "emb_scale"))' > noscale.tq
    run --separate-stderr tq-simmat --db db8.tq --metric dot -k 3 < noscale.tq
    [ "$status" -eq 65 ] && [[ "$stderr" == *emb_scale* ]]
    run --separate-stderr tq-simmat --db noscale.tq --metric dot -k 3 < noscale.tq
    [ "$status" -eq 65 ] && [[ "$stderr" == *emb_scale* ]]
}
