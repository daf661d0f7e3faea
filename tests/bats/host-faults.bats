#!/usr/bin/env bats
# The tools when the host fails under them, sqlite's malloc-failure tests'
# way: through the shim of tests/faults/ (preloaded), the Nth allocation,
# mmap, open of a file for writing, write and read of each tool's run fails
# in turn (tests/fault-sweep.sh host): out of memory must end with exit 1
# and "out of memory" in the one line, an I/O error with 74 (73 for an
# output that cannot be created) and the system's reason, or the run must
# recover with the same bytes; no crash, hang, leak or other sanitizer
# report, -o file or temporary file left behind. The gpu-faults.bats sweeps
# do the same for the GPU driver's calls.
# TQ_FAULT_SAMPLES (default 16 here) sets how many calls of each kind are
# failed; TQ_FAULT_SEED draws the ones between the first and the last at
# random (the failing case's line gives TQ_FAULT_FAIL to rerun it with).
load helpers
bats_require_minimum_version 1.5.0

setup() {
    [ -n "${TQ_FAULT_SHIM:-}" ] && [ -f "$TQ_FAULT_SHIM" ] ||
        skip "no host fault shim (make faults builds it)"
    export TQ_FAULT_SAMPLES=${TQ_FAULT_SAMPLES:-16}
    cd "$BATS_TEST_TMPDIR"
}

# sweep [-i IN] [-t] OUT CMD...: the host fault sweep of one command
sweep() {
    run bash "$TESTS_DIR/fault-sweep.sh" host "$@"
    echo "$output" | tail -n 1 >&3
    [ "$status" -eq 0 ] || fail "$output"
}

# shim VAR=VALUE... CMD...: CMD with the shim preloaded (under the
# sanitizers it comes before their runtime, on purpose)
shim() {
    env LD_PRELOAD="$TQ_FAULT_SHIM" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$@"
}

@test "the shim counts the tool's calls by kind, the same in every run, and fails the one named" {
    tq-embed -m hash:16 "$ROOT_DIR/samples/docs.txt" > in.tq
    shim TQ_FAULT_COUNTS=c1 tq-cat -o out.tq in.tq
    shim TQ_FAULT_COUNTS=c2 tq-cat -o out.tq in.tq
    cmp out.tq in.tq
    for k in alloc mmap open write read; do
        grep -Eq "^$k [0-9]+$" c1 || fail "no count of $k: $(cat c1)"
    done
    cmp c1 c2 || fail "the counts changed: $(cat c1) / $(cat c2)"
    [ "$(awk '$1 == "alloc" { print $2 }' c1)" -gt 1 ] || fail "allocations: $(cat c1)"
    rm out.tq
    TQ_FAULT_QUIET=1 run --separate-stderr shim TQ_FAULT_FAIL=write:1 tq-cat -o out.tq in.tq
    [ "$status" -eq 74 ] || fail "exit $status: $stderr"
    [ "$stderr" = "tq-cat: error: out.tq: write failed: No space left on device" ] || fail "$stderr"
    run --separate-stderr shim TQ_FAULT_FAIL=write:1:EIO tq-cat -o out.tq in.tq
    [ "$status" -eq 74 ] || fail "exit $status: $stderr"
    [[ "$stderr" =~ injected:\ write\ call\ 1\ fails\ with\ Input/output\ error\ \(called\ at\ 0x[0-9a-f]+ ]] ||
        fail "no word from the shim: $stderr"
    TQ_FAULT_QUIET=1 run --separate-stderr shim TQ_FAULT_FAIL=alloc:1 tq-cat -o out.tq in.tq
    [ "$status" -eq 1 ] || fail "exit $status: $stderr"
    [ "$stderr" = "tq-cat: error: out of memory" ] || fail "$stderr"
    TQ_FAULT_QUIET=1 run --separate-stderr shim TQ_FAULT_FAIL=open:1 tq-cat -o out.tq in.tq
    [ "$status" -eq 73 ] || fail "exit $status: $stderr"
    ! ls -A | grep 'out\.tq' || fail "left behind: $(ls -A)"
    run --separate-stderr shim TQ_FAULT_FAIL=alloc:nine tq-cat -o out.tq in.tq
    assert_success
    [[ "$stderr" =~ TQ_FAULT_FAIL=alloc:nine:\ not\ KIND:N ]] || fail "no word on a bad setting: $stderr"
}

@test "the sweep finds each bug planted: a NULL used, a wrong status, a temporary file left, a leak, no word, a hang" {
    [ -x "${TQ_TEST_TOOLS:-}/fault-planted" ] || skip "no fault-planted test tool"
    tq-embed -m hash:16 "$ROOT_DIR/samples/docs.txt" > in.tq
    tq-cat in.tq in.tq in.tq > in3.tq
    planted() {
        run bash "$TESTS_DIR/fault-sweep.sh" host -i in3.tq out.tq "$TQ_TEST_TOOLS/fault-planted" "$@" out.tq
    }
    TQ_FAULT_SAMPLES=1000 planted none
    assert_success
    TQ_FAULT_SAMPLES=1000 planted unchecked
    assert_failure 1
    assert_output --regexp "TQ_FAULT_FAIL=alloc:[0-9]+: (killed by signal 11|exit 1 without one line)"
    TQ_FAULT_SAMPLES=1000 planted status
    assert_failure 1
    assert_output --regexp "TQ_FAULT_FAIL=alloc:[0-9]+: exit 74, not 1"
    TQ_FAULT_SAMPLES=1000 planted tempfile
    assert_failure 1
    assert_output --regexp "TQ_FAULT_FAIL=(alloc|write|read):[0-9:EIO]+: exit (1|74) leaving files behind: \.out\.tq\.tmp-"
    TQ_FAULT_SAMPLES=1000 planted silent
    assert_failure 1
    assert_output --regexp "TQ_FAULT_FAIL=(alloc|write|read):[0-9:EIO]+: exit 0 with another result"
    TQ_FAULT_SAMPLES=2 TQ_FAULT_TIMEOUT=1 planted hang
    assert_failure 1
    assert_output --regexp "TQ_FAULT_FAIL=alloc:1: no end within 1 s"
    case "$TQ_BIN" in
    */san/*) # LeakSanitizer's report: more than one line
        TQ_FAULT_SAMPLES=1000 planted leak
        assert_failure 1
        assert_output --regexp "TQ_FAULT_FAIL=[a-z]+:[0-9:EIO]+: exit [0-9]+ without one line; stderr: .*LeakSanitizer: detected memory leaks"
        ;;
    esac
}

@test "host fault sweep: tq-cat (pass-through, text, .npy and safetensors out, .npy in)" {
    tq-embed -m hash:16 "$ROOT_DIR/samples/docs.txt" > in.tq
    tq-cat --name emb in.tq > emb.tq
    tq-cat --to npy -o in.npy emb.tq
    sweep out.tq tq-cat -o out.tq in.tq emb.tq
    sweep out.tsv tq-cat -t tsv -o out.tsv in.tq
    sweep out.npy tq-cat --to npy -o out.npy emb.tq
    sweep out.st tq-cat --to safetensors -o out.st in.tq
    sweep out.tq tq-cat --from npy --as emb -o out.tq in.npy
}

@test "host fault sweep: tq-simmat top-k, threshold and --dedup" {
    needs_numpy
    simmat_inputs
    sweep -i q.tq out.tq tq-simmat --device cpu --db db.tq -k 5 -o out.tq
    sweep -i q.tq out.tq tq-simmat --device cpu --db db.tq --threshold 0.5 -o out.tq
    sweep -i db.tq out.tq tq-simmat --device cpu --dedup 0.95 -o out.tq
}

@test "host fault sweep: tq-attend, tq-score and tq-quantize" {
    needs_numpy
    py -c "
import numpy as np, tqstream
rng = np.random.default_rng(3)
x = rng.standard_normal((20, 16)).astype(np.float32)
g = (np.arange(20) // 7).astype(np.int64)
open('x.tq', 'wb').write(tqstream.array_frame('emb', x) + tqstream.array_frame('g', g))"
    sweep -i x.tq out.tq tq-attend --device cpu --self --heads 2 --consensus -o out.tq
    sweep -i x.tq out.tq tq-attend --device cpu --self --heads 1 --causal --group g -o out.tq
    py "$TESTS_DIR/lib/score_ref.py" gen . --d 16 --seed 3
    sweep out.tq tq-score --device cpu -m mlp.tq --consensus in.tq -o out.tq
    sweep out.tq tq-score --device cpu -m logistic.tq in.tq -o out.tq
    sweep -i x.tq out.tq tq-quantize --device cpu --to int8 -o out.tq
    sweep -i x.tq out.tq tq-quantize --device cpu --to bit -o out.tq
    # a quantized scorer: coded by tq-quantize, read by tq-score both ways
    sweep out.tq tq-quantize --device cpu --to int8 -o out.tq mlp.tq
    tq-quantize --to int8 -o mlp8.tq mlp.tq
    sweep out.tq tq-score --device cpu --precision int8 -m mlp8.tq in.tq -o out.tq
    sweep out.tq tq-score --device cpu --precision f32 -m mlp8.tq in.tq -o out.tq
}

@test "host fault sweep: tq-embed on text, TSV and JSON lines, with hash: and a .vec model" {
    printf '%s\n' "the cat sat on the mat" "Hello world" "a longer line with more words" > in.txt
    printf 'a\tthe cat\nb\tsat on\nc\tthe mat\n' > in.tsv
    printf '{"text":"the cat sat"}\n{"text":"on the mat"}\n{"text":"hello"}\n' > in.jsonl
    printf '4 3\nthe 0.1 0.2 0.3\ncat 0.5 -0.1 0.25\nsat 1 2 3\nmat -1 0 1\n' > m.vec
    sweep out.tq tq-embed -m hash:16 -o out.tq in.txt
    sweep out.tq tq-embed --tsv -m hash:16 -o out.tq in.tsv
    sweep out.tq tq-embed --jsonl -m hash:16 -o out.tq in.jsonl
    sweep out.tq tq-embed -m m.vec --device cpu -o out.tq in.txt
}

@test "host fault sweep: tq-embed with a BERT folder (safetensors, WordPiece, config)" {
    needs_torch
    py "$TESTS_DIR/lib/make_bert.py" m --pool mean --normalize --max-seq 16 --seed 11
    printf '%s\n' "the cat sat on the mat" "Hello world" "a longer line with more words" > in.txt
    sweep out.tq tq-embed -m m --device cpu --batch 2 -o out.tq in.txt
}

@test "host fault sweep: tq-train (an MLP, with a checkpoint and a plot)" {
    needs_numpy
    py "$TESTS_DIR/lib/train_ref.py" data . softmax --n 120
    sweep out.tq tq-train --device cpu --model mlp --hidden 8 --epochs 2 --batch 32 \
        --checkpoint ck.tq --plot loss.svg -o out.tq in.tq
}

@test "host fault sweep: tq-bench --check and a timed run" {
    export TQ_BENCH_SMALL=1
    sweep out.txt tq-bench --check --device cpu --op matmul,attention,scale -n 64 -o out.txt
    # a measurement without memory is warned of, left out of the report, and
    # the run ends with exit 1 (tq-bench(1), EXIT STATUS): -w
    sweep -t -w out.csv tq-bench --device cpu --op matmul -n 64 -r 1 --min-time 1 --format csv -o out.csv
}
