#!/usr/bin/env bats
# tq-simmat: every mode against a brute-force float64 NumPy reference
# (tests/lib/simref.py states the tolerances), shard + merge against a single
# run byte for byte, FAISS on a realistic size, and bad input.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    py "$TESTS_DIR/lib/simref.py" make db.tq 0 700 24 1 str
    py "$TESTS_DIR/lib/simref.py" make q.tq 0 90 24 2 i64
}

@test "top-k: exact neighbours and scores for every metric, with the database's keys" {
    for m in cosine dot l2; do
        tq-simmat --db db.tq --metric "$m" -k 7 < q.tq > out.tq
        py "$TESTS_DIR/lib/simref.py" topk out.tq q.tq db.tq "$m" 7
    done
}

@test "top-k: K beyond the database leaves empty slots (-1)" {
    py "$TESTS_DIR/lib/simref.py" make small.tq 0 5 24 3 i64
    tq-simmat --db small.tq -k 8 < q.tq > out.tq
    py "$TESTS_DIR/lib/simref.py" topk out.tq q.tq small.tq cosine 8
}

@test "top-k: same bytes whatever the threads and the query batches" {
    tq-simmat --db db.tq -k 5 --threads 1 < q.tq > a.tq
    tq-simmat --db db.tq -k 5 --threads 2 < q.tq > b.tq
    cmp a.tq b.tq
    # the same queries in batches of 11 rows: the same idx and score values
    py -c '
import sys, tqstream as t, numpy as np
fr = t.read(open("q.tq","rb").read())
x = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "emb"])
open("q11.tq","wb").write(b"".join(t.array_frame("emb", x[i:i+11]) for i in range(0, len(x), 11)))'
    tq-simmat --db db.tq -k 5 < q11.tq | tq-cat --name idx,score -t tsv > c.tsv
    tq-cat --name idx,score -t tsv < a.tq > a.tsv
    diff <(grep -v '^idx' a.tsv) <(grep -v '^idx' c.tsv)
}

@test "shard + merge equals a single run, byte for byte" {
    tq-simmat --db db.tq -k 6 < q.tq > single.tq
    for i in 0 1 2; do tq-simmat --db db.tq -k 6 --shard "$i/3" < q.tq > "s$i.tq"; done
    tq-simmat --merge s2.tq s0.tq s1.tq > merged.tq
    cmp single.tq merged.tq
    for m in dot l2; do
        tq-simmat --db db.tq -k 3 --metric "$m" < q.tq > single.tq
        for i in 0 1 2 3 4; do tq-simmat --db db.tq -k 3 --metric "$m" --shard "$i/5" < q.tq > "s$i.tq"; done
        tq-simmat --merge s0.tq s1.tq s2.tq s3.tq s4.tq > merged.tq
        cmp single.tq merged.tq
    done
}

@test "--merge of files that hold no top-k lists is an error, never the input passed back" {
    run --separate-stderr tq-simmat --merge -o out.tq q.tq
    [ "$status" -eq 65 ] && [ ! -e out.tq ] || fail "status $status: $stderr"
    [ "$stderr" = 'tq-simmat: error: file 1 holds no top-k lists ("idx" with shard=I/N, "score"): not an output of tq-simmat --topk --shard' ]
    tq-simmat --db db.tq -k 2 --shard 0/2 < q.tq > s0.tq
    run --separate-stderr tq-simmat --merge -o out.tq s0.tq db.tq
    [ "$status" -eq 65 ] && [ ! -e out.tq ] || fail "status $status: $stderr"
    # shards of an empty query stream are empty: nothing to merge, exit 0
    : > e0.tq
    : > e1.tq
    run tq-simmat --merge -o out.tq e0.tq e1.tq
    assert_success
    [ ! -s out.tq ]
}

@test "full matrix: cosine, dot and l2 against NumPy" {
    for m in cosine dot l2; do
        tq-simmat --db db.tq --metric "$m" < q.tq > out.tq
        py "$TESTS_DIR/lib/simref.py" full out.tq q.tq db.tq "$m"
    done
    # the input with itself, read from a pipe
    cat q.tq | tq-simmat > self.tq
    py "$TESTS_DIR/lib/simref.py" full self.tq q.tq q.tq cosine
}

@test "full matrix: same bytes whatever the threads" {
    tq-simmat --db db.tq --threads 1 < q.tq > a.tq
    tq-simmat --db db.tq --threads 2 < q.tq > b.tq
    cmp a.tq b.tq
}

@test "full matrix: same bytes whatever the batches, in frames of at most 16 MiB" {
    # db.tq comes in batches of 37 rows; one.tq is the same rows as one batch
    py -c '
import numpy as np, tqstream as t
fr = t.read(open("db.tq","rb").read())
x = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "emb"])
open("one.tq","wb").write(t.array_frame("emb", x))'
    for m in cosine l2; do
        tq-simmat --db db.tq --metric "$m" < db.tq | tq-cat --name sim --to npy -o a.npy
        tq-simmat --db db.tq --metric "$m" < one.tq | tq-cat --name sim --to npy -o b.npy
        cmp a.npy b.npy
    done
    py "$TESTS_DIR/lib/simref.py" full <(tq-simmat --db db.tq < one.tq) one.tq db.tq cosine
    # 3000 database rows: a batch of 3000 queries is written in slices of
    # 16 MiB at most, with the bytes of 37-row batches
    py "$TESTS_DIR/lib/simref.py" make big.tq 0 3000 8 5 i64
    py -c '
import numpy as np, tqstream as t
fr = t.read(open("big.tq","rb").read())
x = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "emb"])
open("big1.tq","wb").write(t.array_frame("emb", x))'
    tq-simmat < big.tq > s37.tq
    tq-simmat < big1.tq > s1.tq
    cmp <(tq-cat --name sim --to npy < s37.tq) <(tq-cat --name sim --to npy < s1.tq)
    py -c '
import tqstream as t
fr = [f for f in t.read(open("s1.tq","rb").read()) if f["name"] == "sim"]
rows = [f["dims"][0] for f in fr]
assert sum(rows) == 3000 and len(rows) > 1, rows
assert all(r * 3000 * 4 <= 16 << 20 for r in rows), rows'
    py "$TESTS_DIR/lib/simref.py" full s1.tq big1.tq big1.tq cosine
}

@test "full matrix: memory of one 16 MiB frame, not of the batch's rows" {
    needs_peak_rss
    # one batch of 8000 rows: its matrix is 256 MB, the frames 16 MiB each
    py -c '
import numpy as np, sys, tqstream as tq
x = np.random.default_rng(4).standard_normal((8000, 16)).astype(np.float32)
sys.stdout.buffer.write(tq.array_frame("emb", x))' > big.tq
    run /usr/bin/time -f "%M" tq-simmat -o /dev/null < big.tq
    assert_success
    echo "max RSS ${lines[-1]} KiB"
    [ "${lines[-1]}" -lt $((64 * 1024)) ]
}

@test "a database of one plain f32 frame is used in place, mapped: the same bytes as read" {
    # 12000 rows of 24 (1.1 MB, enough to be mapped) in 37-row batches, and
    # the same rows and keys as one frame
    py "$TESTS_DIR/lib/simref.py" make many.tq 0 12000 24 6 str
    py -c '
import numpy as np, tqstream as t
fr = t.read(open("many.tq","rb").read())
x = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "emb"])
k = ["doc%d" % i for i in range(len(x))]
open("single.tq","wb").write(t.frame("key", "str", [len(k)], t.str_payload(k)) + t.array_frame("emb", x))'
    for m in dot l2; do
        tq-simmat -v --db single.tq --metric "$m" -k 5 < q.tq > a.tq 2> a.log
        grep -q "mapped in place" a.log
        tq-simmat -v --db many.tq --metric "$m" -k 5 < q.tq > b.tq 2> b.log
        grep -q "read into memory" b.log
        cmp a.tq b.tq
        tq-simmat --db single.tq --metric "$m" -k 5 --shard 1/3 < q.tq > a.tq
        tq-simmat --db many.tq --metric "$m" -k 5 --shard 1/3 < q.tq > b.tq
        cmp a.tq b.tq
        tq-simmat --db single.tq --metric "$m" --threshold 0 < q.tq > a.tq
        tq-simmat --db many.tq --metric "$m" --threshold 0 < q.tq > b.tq
        cmp a.tq b.tq
        tq-simmat --db single.tq --metric "$m" < q.tq | tq-cat --name sim --to npy -o a.npy
        tq-simmat --db many.tq --metric "$m" < q.tq | tq-cat --name sim --to npy -o b.npy
        cmp a.npy b.npy
    done
    py "$TESTS_DIR/lib/simref.py" topk <(tq-simmat --db single.tq --metric dot -k 5 < q.tq) q.tq many.tq dot 5
    # cosine scales the rows: read
    tq-simmat -v --db single.tq -k 5 < q.tq 2>&1 >/dev/null | grep -q "read into memory"
}

@test "threshold: every pair above it, and i < j for the input with itself" {
    tq-simmat --db db.tq --threshold 0.45 < q.tq > out.tq
    py "$TESTS_DIR/lib/simref.py" threshold out.tq q.tq db.tq cosine 0.45 db
    tq-simmat --threshold 0.4 < db.tq > self.tq
    py "$TESTS_DIR/lib/simref.py" threshold self.tq db.tq db.tq cosine 0.4 self
    tq-simmat --metric l2 --threshold -20 < q.tq > l2.tq
    py "$TESTS_DIR/lib/simref.py" threshold l2.tq q.tq q.tq l2 -20 self
}

@test "threshold: pairs carry key_i and key_j, and no query frame passes" {
    # simref checks key_i (the query's key of i) and key_j (the database's key
    # of j) pair by pair, and that no key or emb frame of the queries is in the
    # output; here with i64 query keys and str database keys
    tq-simmat --db db.tq --threshold 0.5 < q.tq > out.tq
    py "$TESTS_DIR/lib/simref.py" threshold out.tq q.tq db.tq cosine 0.5 db
    # a threshold that gives as many pairs as a batch has rows: still only the
    # pair frames (the query keys once came first and looked like labels)
    py -c '
import numpy as np, tqstream as t
x = np.eye(4, 8, dtype=np.float32)
x[1] = x[0]; x[3] = x[2]
open("pairs.tq","wb").write(t.array_frame("key", np.array([7, 8, 9, 10], dtype=np.int64)) + t.array_frame("emb", x))
open("nokeys.tq","wb").write(t.array_frame("emb", x))'
    tq-simmat --threshold 0.9 < pairs.tq > p.tq
    [ "$(tq-cat -t tsv < p.tq)" = "$(printf 'i\tj\tscore\tkey_i\tkey_j\n0\t1\t1\t7\t8\n2\t3\t1\t9\t10')" ]
    py "$TESTS_DIR/lib/simref.py" threshold p.tq pairs.tq pairs.tq cosine 0.9 self
    tq-simmat --threshold 0.9 < nokeys.tq > n.tq
    py "$TESTS_DIR/lib/simref.py" threshold n.tq nokeys.tq nokeys.tq cosine 0.9 self
}

@test "threshold: the int8 screen keeps every pair, on rows with near-duplicates, every metric" {
    # 1000 rows of 96 in clusters (pairs at 0.7-0.99), scaled (dot, l2): on
    # the CPU the screen decides which pairs get their exact score; the
    # float64 reference finds every pair above the threshold (simref.py's
    # tolerance), so a pair the screen wrongly drops fails here. A NaN row
    # (database) or query turns the screen off for it: the matrix product's
    # path, the same pairs.
    py -c '
import numpy as np, tqstream as t
rng = np.random.default_rng(9)
c = rng.standard_normal((150, 96)).astype(np.float32)
x = c[rng.integers(0, 150, 1000)] + rng.uniform(0.1, 0.9, (1000, 1)).astype(np.float32) * rng.standard_normal((1000, 96)).astype(np.float32)
x *= rng.uniform(0.05, 0.2, (1000, 1)).astype(np.float32)
open("c.tq", "wb").write(b"".join(t.array_frame("emb", x[b:b + 300]) for b in range(0, 1000, 300)))
x[417, 5] = np.nan
open("cn.tq", "wb").write(t.array_frame("emb", x))'
    for args in "cosine 0.8" "dot 2" "l2 -0.5"; do
        set -- $args
        tq-simmat -v --metric "$1" --threshold "$2" < c.tq > out.tq 2> err
        grep -q "an int8 screen of the first [0-9]* values let" err
        py "$TESTS_DIR/lib/simref.py" threshold out.tq c.tq c.tq "$1" "$2" self
        tq-simmat --metric "$1" --threshold "$2" --db c.tq < c.tq > db.tq
        py "$TESTS_DIR/lib/simref.py" threshold db.tq c.tq c.tq "$1" "$2" db
    done
    # cosine at 0.95 on these rows: the screen reads the first quarter of each row
    tq-simmat -v --threshold 0.95 < c.tq 2>&1 >/dev/null | grep -q "first 24 values"
    tq-simmat -v --threshold 0.8 < cn.tq > n.tq 2> err
    grep -q "the matrix product screened them" err
    py "$TESTS_DIR/lib/simref.py" threshold n.tq cn.tq cn.tq cosine 0.8 self
    tq-simmat --threshold 0.8 --db c.tq < cn.tq > nq.tq
    py "$TESTS_DIR/lib/simref.py" threshold nq.tq cn.tq c.tq cosine 0.8 db
}

@test "dedup: the greedy reference keeps the same rows, keys aligned" {
    tq-simmat --dedup 0.3 < db.tq > out.tq
    py "$TESTS_DIR/lib/simref.py" dedup out.tq db.tq cosine 0.3
    # against a database of rows already kept
    tq-simmat --dedup 0.35 --db q.tq < db.tq > out2.tq
    py "$TESTS_DIR/lib/simref.py" dedup out2.tq db.tq cosine 0.35 q.tq
}

@test "dedup: a column after its vectors (emb, then y) loses the same rows; keys before stay the next batch's" {
    # batches of key, emb, y, where y = 10 x key: each kept row must keep its
    # own y; the keys come before each batch's vectors, y after
    py -c "
import numpy as np, tqstream as t, sys
rng = np.random.default_rng(7)
x = rng.standard_normal((300, 8)).astype(np.float32)
x[150:] = x[:150] + 0.01 * rng.standard_normal((150, 8)).astype(np.float32)  # near-copies
out = b''
for b in range(0, 300, 100):
    k = np.arange(b, b + 100, dtype=np.int64)
    out += t.array_frame('key', k) + t.array_frame('emb', x[b:b + 100]) + t.array_frame('y', 10 * k)
sys.stdout.buffer.write(out)" > ky.tq
    tq-simmat --dedup 0.95 < ky.tq > out.tq
    py "$TESTS_DIR/lib/simref.py" dedup out.tq ky.tq cosine 0.95
    py -c "
import numpy as np, tqstream as t
fr = t.read(open('out.tq', 'rb').read())
assert [f['name'] for f in fr] == ['key', 'emb', 'y'] * 3, [f['name'] for f in fr]
for i in range(0, 9, 3):
    k, e, y = (t.to_numpy(f) for f in fr[i:i + 3])
    assert len(k) == len(e) == len(y), (len(k), len(e), len(y))
    assert (y == 10 * k).all(), 'y no longer lines up with its rows'
assert sum(len(t.to_numpy(f)) for f in fr[0::3]) < 300, 'nothing was dropped'"
}

@test "dedup: never exit 0 having decided nothing: a stream without vectors is an error, with --db or not" {
    # once: "0 rows kept, 0 dropped", the input back, exit 0
    tq-cat --name key q.tq > keys.tq
    for db in "--db db.tq" ""; do
        for t in 0.35 -1; do
            run --separate-stderr tq-simmat --dedup "$t" $db -o out.tq < keys.tq
            echo "$db $t: $status $stderr"
            [ "$status" -eq 65 ]
            [ "${#stderr_lines[@]}" -eq 1 ]
            [ ! -e out.tq ]
        done
    done
    [[ "$stderr" == 'tq-simmat: error: no vectors in standard input: none of its frames ("key") is a rank 2 float or code frame'* ]]
    run --separate-stderr tq-simmat --dedup 0.35 --db db.tq < keys.tq
    [ "$stderr" = 'tq-simmat: error: no query vectors in standard input: no frame "emb" among its frames ("key"): give vectors (tq-embed, tq-quantize) or name their frame with --name' ]
    # an empty stream has nothing to decide: an empty stream back
    : > empty.tq
    tq-simmat --dedup 0.35 --db db.tq < empty.tq > out.tq
    [ ! -s out.tq ]
    # queries of another name than the database's: decided, as under its name
    py -c '
import numpy as np, simref
x, _ = simref.rows("db.tq")
np.save("x.npy", x.astype(np.float32))'
    tq-cat --from npy x.npy | tq-simmat --dedup 0.35 --db q.tq > x.tq
    tq-simmat --dedup 0.35 --db q.tq < db.tq > e.tq
    tq-cat -t tsv --no-header --name x < x.tq > x.tsv
    tq-cat -t tsv --no-header --name emb < e.tq > e.tsv
    [ -s e.tsv ]
    diff x.tsv e.tsv
}

@test "dedup: the int8 screen keeps the greedy reference's rows, and stands down for a NaN" {
    # clustered rows (many near-duplicates) in batches, with keys: the float64
    # greedy reference keeps the same rows; a NaN row in the third batch turns
    # the screen off from there (simtopk's path), the same rows again
    py -c '
import numpy as np, tqstream as t
rng = np.random.default_rng(11)
c = rng.standard_normal((120, 64)).astype(np.float32)
x = c[rng.integers(0, 120, 900)] + rng.uniform(0.1, 0.9, (900, 1)).astype(np.float32) * rng.standard_normal((900, 64)).astype(np.float32)
def write(path, x):
    open(path, "wb").write(b"".join(t.array_frame("key", np.arange(b, b + 250, dtype=np.int64)[:len(x[b:b + 250])]) +
                                    t.array_frame("emb", x[b:b + 250]) for b in range(0, 900, 250)))
write("c.tq", x)
x[600, 7] = np.nan
write("cn.tq", x)'
    tq-simmat -v --dedup 0.8 < c.tq > out.tq 2> err
    grep -q "an int8 screen of the first [0-9]* values let" err
    py "$TESTS_DIR/lib/simref.py" dedup out.tq c.tq cosine 0.8
    tq-simmat --metric l2 --dedup -40 < c.tq > l2.tq
    py "$TESTS_DIR/lib/simref.py" dedup l2.tq c.tq l2 -40
    tq-simmat --dedup 0.8 < cn.tq > n.tq
    py "$TESTS_DIR/lib/simref.py" dedup n.tq cn.tq cosine 0.8
}

@test "FAISS IndexFlatIP finds the same neighbours on 20000 x 384" {
    PYF=""
    for p in "$ROOT_DIR/.venv/bin/python" /usr/bin/python3; do
        "$p" -c 'import faiss' 2>/dev/null && { PYF=$p; break; }
    done
    [ -n "$PYF" ] || skip "faiss is not installed (python3-faiss, or faiss-cpu in .venv)"
    "$PYF" -c '
import numpy as np, tqstream as t
rng = np.random.default_rng(5)
x = rng.standard_normal((20000, 384)).astype(np.float32); x /= np.linalg.norm(x, axis=1, keepdims=True)
q = rng.standard_normal((200, 384)).astype(np.float32); q /= np.linalg.norm(q, axis=1, keepdims=True)
np.save("x.npy", x); np.save("q.npy", q)'
    tq-cat --from npy --as emb x.npy > x.tq
    tq-cat --from npy --as emb q.npy | tq-simmat --db x.tq --metric dot -k 10 > out.tq
    "$PYF" -c '
import numpy as np, faiss, tqstream as t
x, q = np.load("x.npy"), np.load("q.npy")
ix = faiss.IndexFlatIP(384); ix.add(x); D, I = ix.search(q, 10)
fr = t.read(open("out.tq","rb").read())
idx = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "idx"])
sc = np.concatenate([t.to_numpy(f) for f in fr if f["name"] == "score"])
# FAISS scores come from an f32 sgemm (error ~ d 2^-24): 1e-4; neighbours may
# swap only where two scores are that close.
bad = [(i, r) for i in range(len(q)) for r in range(10)
       if I[i, r] != idx[i, r] and abs(D[i, r] - sc[i, r]) > 1e-4]
assert not bad, bad[:5]
assert np.abs(D - sc).max() < 1e-4, np.abs(D - sc).max()'
}

@test "bad input: one line, the exit status of the conventions" {
    run --separate-stderr tq-simmat --metric cos < q.tq
    [ "$status" -eq 2 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [[ "$stderr" == "tq-simmat: error: "* ]]
    run --separate-stderr tq-simmat --db missing.tq < q.tq
    [ "$status" -eq 66 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    run --separate-stderr tq-simmat -k 3 --shard 3/3 --db db.tq < q.tq
    [ "$status" -eq 2 ]
    run --separate-stderr tq-simmat --shard 0/2 --db db.tq < q.tq
    [ "$status" -eq 2 ]
    py "$TESTS_DIR/lib/simref.py" make wide.tq 0 5 25 3 i64
    run --separate-stderr tq-simmat --db db.tq -k 2 < wide.tq
    [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [[ "$stderr" == *"25 values"* ]]
    head -c 1000 db.tq > cut.tq
    run --separate-stderr tq-simmat --db cut.tq -k 2 < q.tq
    [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    tq-simmat --db db.tq -k 2 < q.tq > a.tq
    tq-simmat --db db.tq -k 2 --metric dot < q.tq > b.tq
    run --separate-stderr tq-simmat --merge a.tq q.tq
    [ "$status" -eq 65 ]
    run --separate-stderr tq-simmat --merge
    [ "$status" -eq 2 ]
    # shards that are not all of one search, once each: refused, not merged
    for i in 0 1 2; do tq-simmat --db db.tq -k 2 --shard "$i/3" < q.tq > "s$i.tq"; done
    tq-simmat --db db.tq -k 2 --metric dot --shard 1/3 < q.tq > d1.tq
    for files in "s0.tq s2.tq" "s0.tq s0.tq s2.tq" "s0.tq d1.tq s2.tq"; do
        run --separate-stderr tq-simmat --merge $files
        [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ] && [ -z "$output" ]
    done
}

@test "messages name standard input, never the spool file behind it" {
    # an empty or cut stream on a pipe is spooled to a file of TMPDIR: the
    # message must say stdin, and name nothing of TMPDIR
    export TMPDIR="$BATS_TEST_TMPDIR/spool"
    mkdir -p "$TMPDIR"
    run --separate-stderr sh -c 'printf "" | tq-simmat'
    [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [[ "$stderr" == "tq-simmat: error: stdin: "* ]]
    [[ "$stderr" != *"$TMPDIR"* && "$stderr" != *"tq-simmat."* ]]
    head -c 1000 q.tq > cut.tq
    for mode in "" "-k 2" "--threshold 0.5"; do
        run --separate-stderr sh -c "cat cut.tq | tq-simmat $mode"
        [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
        [[ "$stderr" == "tq-simmat: error: stdin: "* ]]
        [[ "$stderr" != *"$TMPDIR"* ]]
    done
    # nothing is left behind in TMPDIR
    [ -z "$(ls -A "$TMPDIR")" ]
}

@test "default frames: emb, else the one rank 2 float frame, else an error naming them" {
    # queries named x (tq-cat --from npy) against a database of emb: the one
    # rank 2 float frame of the queries is taken, as if it were named emb
    py -c '
import numpy as np, simref
x, _ = simref.rows("q.tq")
np.save("q.npy", x.astype(np.float32))'
    run --separate-stderr sh -c 'tq-cat --from npy q.npy | tq-simmat --db db.tq -k 4 -v > x.tq'
    assert_success
    [[ "$stderr" == *'database vectors: frame "emb" (its default name)'* ]]
    [[ "$stderr" == *'query vectors: frame "x" (the only rank 2 float or code frame; none is named "emb")'* ]]
    run py "$TESTS_DIR/lib/simref.py" topk x.tq q.tq db.tq cosine 4
    assert_success
    # the input against itself, named x: the same
    run --separate-stderr sh -c 'tq-cat --from npy q.npy | tq-simmat --threshold 0.3 -v > t.tq'
    assert_success
    [[ "$stderr" == *'tq-simmat: vectors: frame "x" (the only rank 2 float or code frame; none is named "emb")'* ]]
    # two rank 2 float frames, neither named emb: an error naming both
    run --separate-stderr sh -c 'tq-cat --from npy --as a --as b q.npy q.npy | tq-simmat -k 2'
    [ "$status" -eq 2 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [ "$stderr" = 'tq-simmat: error: more than one frame could be the vectors ("a", "b", all rank 2 float or code) and none is named "emb": name one with --name' ]
    run --separate-stderr sh -c 'tq-cat --from npy --as a --as b q.npy q.npy | tq-simmat --dedup 0.9'
    [ "$status" -eq 2 ] && [[ "$stderr" == *'("a", "b", all rank 2 float or code)'*"--name"* ]]
    run --separate-stderr sh -c 'tq-cat --from npy --as a --as b q.npy q.npy | tq-simmat -k 2 --name b -v > /dev/null'
    assert_success
    [[ "$stderr" == *'vectors: frame "b" (named by --name)'* ]]
}

@test "--db: frames of one name on both sides each come from their own input; widths must agree; -v says what came from where" {
    # what tq-embed writes on both sides: "key" and "emb"
    printf 'the cat sat\nbirds fly\n' > q.txt
    printf 'a dog ran\nthe cat sat on the mat\nbirds fly south\n' > kv.txt
    tq-embed -m hash:384 q.txt > q384.tq
    tq-embed -m hash:384 kv.txt > db384.tq
    tq-embed -m hash:8 q.txt > q8.tq
    run --separate-stderr tq-simmat -v --db db384.tq -o full.tq < q384.tq
    assert_success
    [[ "$stderr" == *'tq-simmat: query vectors: frame "emb" [2 x 384] from standard input; database vectors: frame "emb" [3 x 384] from db384.tq'* ]]
    py "$TESTS_DIR/lib/simref.py" full full.tq q384.tq db384.tq cosine
    tq-simmat --db db384.tq -k 3 < q384.tq > top.tq
    py "$TESTS_DIR/lib/simref.py" topk top.tq q384.tq db384.tq cosine 3
    # the input against itself: one input, said once
    run --separate-stderr tq-simmat -v -k 2 -o self.tq < db384.tq
    assert_success
    [[ "$stderr" == *'tq-simmat: vectors: frame "emb" [3 x 384] from standard input'* ]]
    # queries of 8 values against a database of 384, in every mode and for
    # codes: one line naming both, exit 65
    tq-quantize --to int8 < db384.tq > dbc.tq
    want='tq-simmat: error: query vectors and database vectors differ in width: "emb" from standard input has 8 values a row, "emb" from db384.tq has 384'
    for mode in "--db db384.tq" "--db db384.tq -k 2" "--db db384.tq --threshold 0" \
                "--db db384.tq --dedup 0.9" "--db dbc.tq --metric dot -k 2"; do
        run --separate-stderr tq-simmat $mode -o bad.tq < q8.tq
        echo "$mode: $status $stderr"
        [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
        db=${mode#--db } && db=${db%% *}
        [ "$stderr" = "${want/db384.tq/$db}" ]
        [ ! -e bad.tq ]
    done
}

# tq-simmat.1 (NaN and infinities): IEEE arithmetic, contained. A NaN in query
# 7 or in database row 30 (tests/lib/simnan.py) makes that row's scores NaN
# and moves nothing else: against a run on the clean inputs, every other score
# of the full matrix, every other top-k list (-k all rows, and -k 5 as its
# first 5) and every other pair of --threshold is the same bits, and the NaN
# row ranks below every number; an infinity gives infinite (or, for cosine,
# NaN) scores in its row only. --dedup keeps a NaN row (it matches nothing)
# and decides every other row as if it were not there.
@test "NaN and infinities stay in their row: full matrix, top-k, threshold and dedup, every metric, every device" {
    py "$TESTS_DIR/lib/simnan.py" gen .
    chk() { run py "$TESTS_DIR/lib/simnan.py" "$@"; [ "$output" = ok ] || fail "$dev $m: $* : $output"; }
    all_devices
    # under the sanitizers (CI's second pass: the same code, checked for
    # memory errors) each device but the CPU takes one metric, in turn
    local di=0 san=0
    case "$TQ_BIN" in */san/*) san=1 ;; esac
    for dev in $devices; do
        di=$((di + 1))
        mi=0
        for mt in "cosine 0.5 0.9" "dot 10 15" "l2 -10 -2"; do
            mi=$((mi + 1))
            [ "$san" = 0 ] || [ "$dev" = cpu ] || [ $(((di + mi) % 3)) = 0 ] || continue
            set -- $mt
            m=$1 t=$2 dd=$3
            sm() { tq-simmat --device "$dev" --metric "$m" "$@"; }
            sm --db db.tq < q.tq > full.tq
            sm --db db.tq -k 300 < q.tq > all.tq
            sm --db db.tq --threshold "$t" < q.tq > pairs.tq
            for kind in nan inf; do
                for side in q db; do
                    if [ "$side" = q ]; then qf=q-$kind.tq dbf=db.tq bq=7 bd=-1; else qf=q.tq dbf=db-$kind.tq bq=-1 bd=30; fi
                    sm --db "$dbf" < "$qf" > bfull.tq
                    chk full full.tq bfull.tq $bq $bd $kind "$m"
                    sm --db "$dbf" -k 300 < "$qf" > ball.tq
                    chk topk all.tq ball.tq $bq $bd
                    sm --db "$dbf" -k 5 < "$qf" > b5.tq
                    chk prefix ball.tq b5.tq
                    sm --db "$dbf" --threshold "$t" < "$qf" > bpairs.tq
                    chk pairs pairs.tq bpairs.tq $bq $bd "$t" bfull.tq
                done
            done
            sm --dedup "$dd" < db-less.tq > less.tq
            sm --dedup "$dd" < db-nan.tq > dd.tq
            chk dedup dd.tq less.tq 30
        done
        # cosine scales an infinite row to NaN: kept by dedup as well
        tq-simmat --device "$dev" --dedup 0.9 < db-inf.tq > dd.tq
        tq-simmat --device "$dev" --dedup 0.9 < db-less.tq > less.tq
        chk dedup dd.tq less.tq 30
    done
    # queries of a database of codes are coded first: a NaN has no code
    tq-quantize --to int8 < db.tq > db8.tq
    run --separate-stderr tq-simmat --db db8.tq --metric dot -k 3 -o o.tq < q-nan.tq
    [ "$status" -eq 65 ] && [ ! -e o.tq ]
    [ "$stderr" = 'tq-simmat: error: frame 0 "emb": row 7 has a NaN or an infinity' ]
}

@test "QUERIES as a file argument: the same bytes as on standard input, in every mode" {
    for mode in "" "-k 3" "--threshold 0.5" "--dedup 0.9" "--db db.tq -k 4" "--db db.tq --dedup 0.9"; do
        tq-simmat $mode < q.tq > stdin.tq
        tq-simmat $mode q.tq > file.tq
        cmp stdin.tq file.tq || fail "$mode: FILE differs from standard input"
        tq-simmat $mode - < q.tq > dash.tq
        cmp stdin.tq dash.tq || fail "$mode: - differs from standard input"
        tq-simmat $mode <(cat q.tq) > pipe.tq
        cmp stdin.tq pipe.tq || fail "$mode: a pipe as FILE differs from standard input"
    done
    run --separate-stderr tq-simmat -v --db db.tq -k 2 q.tq -o out.tq
    assert_success
    [[ "$stderr" == *'query vectors: frame "emb" [90 x 24] from q.tq; database vectors: frame "emb" [700 x 24] from db.tq'* ]] ||
        fail "-v does not name q.tq: $stderr"
    run --separate-stderr tq-simmat -k 2 q.tq q.tq
    [ "$status" -eq 2 ] && [ -z "$output" ]
    [ "$stderr" = "tq-simmat: error: one input at most, not 2 (the database: --db); see 'tq-simmat --help'" ]
    run --separate-stderr tq-simmat -k 2 no-such.tq
    [ "$status" -eq 66 ] && [ -z "$output" ]
    [ "$stderr" = "tq-simmat: error: no-such.tq: cannot open: No such file or directory" ]
}
