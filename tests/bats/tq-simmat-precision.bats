#!/usr/bin/env bats
# tq-simmat --precision bf16: the products that rank --topk's candidates
# take bf16 operands (a CPU with AVX512-BF16), and the bound that widens them
# (tq-simmat.1, DETERMINISM) must leave the output the f32 run's, byte for
# byte: compared with cmp, and with the float64 NumPy reference
# (tests/lib/simref.py, its tolerances) so that a shared error cannot hide.
# The data are the hard cases for a bound: rows on a grid of eighths (exact
# ties and near-ties by the thousand), near-copies, and plain random rows;
# every metric. Where the CPU lacks AVX512-BF16: the f32 run's bytes and the
# -v note. The op-level checks (NaN, infinities, huge rows, blocks) are the
# op suite's (tests/unit/test_ops.c, simtopk groups).
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    bf16=0
    grep -qw avx512_bf16 /proc/cpuinfo && bf16=1
}

# grid.tq: keys and 3000 x 48 rows on a grid of eighths plus a little noise on a third
# of the values, and 20 exact copies; gq.tq: 60 queries of the same kind
make_grid() {
    py -c '
import numpy as np, tqstream as t
r = np.random.default_rng(5)
def rows(n):
    x = (r.integers(0, 8, (n, 48)) * 0.125).astype(np.float32)
    noise = (r.uniform(-0.01, 0.01, (n, 48)) * (r.integers(0, 3, (n, 48)) == 0)).astype(np.float32)
    return x + noise
x = rows(3000)
x[2980:] = x[:20]
keys = np.arange(3000, dtype=np.int64)
open("grid.tq", "wb").write(t.array_frame("key", keys) + t.array_frame("emb", x))
open("gq.tq", "wb").write(t.array_frame("emb", rows(60)))'
}

@test "--precision bf16 --topk: the f32 run's bytes and the float64 reference's lists, every metric, tied and random rows" {
    make_grid
    py "$TESTS_DIR/lib/simref.py" make db.tq 0 5000 96 1 str
    py "$TESTS_DIR/lib/simref.py" make q.tq 0 70 96 2 i64
    for set in "grid.tq gq.tq" "db.tq q.tq"; do
        read -r db q <<< "$set"
        for m in cosine dot l2; do
            for k in 1 10 300; do
                tq-simmat --db "$db" --metric "$m" -k "$k" < "$q" > f32.tq
                run --separate-stderr tq-simmat -v --precision bf16 --db "$db" --metric "$m" -k "$k" -o bf16.tq "$q"
                assert_success
                cmp f32.tq bf16.tq || fail "$db $m k=$k: bf16 ranking changed the output"
                if [ "$bf16" = 1 ]; then
                    [[ "$stderr" =~ rows\ scored\ exactly,\ the\ candidates\ of\ bf16\ products ]] ||
                        fail "no bf16 count: $stderr"
                else
                    [[ "$stderr" == *"--precision bf16: f32 products on cpu"* ]] || fail "no note: $stderr"
                fi
            done
            py "$TESTS_DIR/lib/simref.py" topk bf16.tq "$q" "$db" "$m" 300
        done
    done
}

@test "--precision bf16: more rows scored exactly than f32's, said under -v; the same bytes with 1 and 2 threads" {
    [ "$bf16" = 1 ] || skip "no AVX512-BF16 on this CPU (the products stay f32)"
    py "$TESTS_DIR/lib/simref.py" make db.tq 0 20000 64 3 i64
    py "$TESTS_DIR/lib/simref.py" make q.tq 0 200 64 4 i64
    count() { sed -n 's/.*: \([0-9]*\) rows scored exactly, the candidates of \(f32\|bf16\) products/\1/p'; }
    f=$(tq-simmat -v --db db.tq -k 10 -o a.tq q.tq 2>&1 | count)
    b=$(tq-simmat -v --precision bf16 --threads 1 --db db.tq -k 10 -o b.tq q.tq 2>&1 | count)
    tq-simmat --precision bf16 --threads 2 --db db.tq -k 10 -o c.tq q.tq
    cmp a.tq b.tq
    cmp a.tq c.tq
    # at least the lists' 2000 rows; bf16's bound is some 2^15 times f32's
    [ "$f" -ge 2000 ] && [ "$b" -gt "$f" ] || fail "rows scored exactly: f32 $f, bf16 $b"
}

@test "--precision: a value other than f32 or bf16, or bf16 for the full matrix, --threshold or --dedup, is exit 2 in one line" {
    py "$TESTS_DIR/lib/simref.py" make db.tq 0 50 8 1 i64
    run --separate-stderr tq-simmat --precision f16 --db db.tq -k 3 db.tq
    assert_failure 2
    [[ "$stderr" == "tq-simmat: error: --precision wants f32 or bf16, not 'f16'"* ]] || fail "$stderr"
    for mode in "" "--threshold 0.5" "--dedup 0.9"; do
        # shellcheck disable=SC2086
        run --separate-stderr tq-simmat --precision bf16 $mode --db db.tq db.tq
        assert_failure 2
        [ "$(wc -l <<< "$stderr")" -eq 1 ] && [[ "$stderr" == *"--precision bf16 ranks the candidates of --topk ("* ]] ||
            fail "$mode: $stderr"
    done
    # f32 is the default, accepted everywhere
    tq-simmat --precision f32 --db db.tq db.tq > a.tq
    tq-simmat --db db.tq db.tq > b.tq
    cmp a.tq b.tq
}
