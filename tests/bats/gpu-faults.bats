#!/usr/bin/env bats
# The CUDA and HIP backends when the GPU fails under them, on the stand-in
# driver (tests/standin/README.md): the driver's launch rule an H200 taught
# us, and every driver call of each tool's GPU path failed in turn
# (tests/fault-sweep.sh gpu: exit 1 with one line naming the device, the call
# and the driver's error, or a recovery with the same bytes; no crash, hang,
# leak under the sanitizers, -o file or temporary file left behind).
# TQ_FAULT_SAMPLES (default 4) sets how many calls of each kind are failed.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    use_standin_driver
    export TQ_AUTO_MIN_FLOPS=0
    cd "$BATS_TEST_TMPDIR"
}

# built BACKEND: whether this build has the backend (nvcc / hipcc were there)
built() { ! tq-cat --list-devices | grep -q "^$1 .*not built"; }

# sweep BACKEND [-i IN] OUT CMD...: the fault sweep of one command, on each of
# the backends named that this build has
sweep() {
    local b args=("${@:2}")
    for b in $1; do
        built "$b" || continue
        run bash "$TESTS_DIR/fault-sweep.sh" gpu "${args[@]//@DEV@/$b}"
        echo "$output" | tail -n 1 >&3
        [ "$status" -eq 0 ] || fail "$output"
    done
}

@test "the stand-in refuses the padded launch an H200 refused: the old launch size fails the op suite" {
    [ -n "${TQ_PAD_SHIM:-}" ] && [ -f "$TQ_PAD_SHIM" ] || skip "no pad shim (make standin builds it)"
    [ -x "${TQ_TEST_UNIT:-}/test_ops" ] || skip "no op suite binary"
    built cuda || skip "this build has no CUDA backend"
    # a few groups of kernels: rows and elementwise hold the four that failed
    # on the H200 (scale, add_row, layernorm; topk is its own group)
    TQ_TEST_GROUPS=rows,elementwise,topk TQ_TEST_DEVICES=cuda TQ_STANDIN_QUIET=1 \
        run "$TQ_TEST_UNIT/test_ops"
    assert_success
    assert_output --regexp "[0-9]+ passed, 0 failed"
    TQ_TEST_GROUPS=rows,elementwise,topk TQ_TEST_DEVICES=cuda TQ_STANDIN_QUIET=1 \
        TQ_CUDA_DRIVER="$TQ_PAD_SHIM" TQ_PAD_SHIM_TARGET="$TQ_STANDIN_LIB" run "$TQ_TEST_UNIT/test_ops"
    assert_failure
    for k in tq_k_scale tq_k_add_row tq_k_layernorm tq_k_topk; do
        grep -q "cuLaunchKernel: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (launching $k)" <<< "$output" ||
            fail "$k launched with a padded size was not refused"
    done
}

@test "the stand-in counts calls by kind and fails the one named, with the driver's error" {
    built cuda || skip "this build has no CUDA backend"
    tq-embed -m hash:16 "$ROOT_DIR/samples/docs.txt" > in.tq
    TQ_STANDIN_COUNTS=counts tq-simmat --device cuda -k 3 -o out.tq < in.tq
    for k in launch alloc copy sync event module blas graph context; do
        grep -Eq "^$k [0-9]+$" counts || fail "no count of $k: $(cat counts)"
    done
    n=$(awk '$1 == "copy" { print $2 }' counts)
    [ "$n" -gt 1 ] || fail "copies: $n"
    TQ_STANDIN_QUIET=1 TQ_STANDIN_FAIL=copy:$n run --separate-stderr tq-simmat --device cuda -k 3 -o o2.tq < in.tq
    [ "$status" -eq 1 ] || fail "exit $status: $stderr"
    [[ "$stderr" =~ ^tq-simmat:\ error:\ cuda:0:\ cuMemcpy[A-Za-z]*:\ CUDA_ERROR_INVALID_VALUE\ \(copying ]] ||
        fail "message: $stderr"
    [ ! -e o2.tq ]
    TQ_STANDIN_FAIL=copy:nine run --separate-stderr tq-simmat --device cuda -k 3 -o o3.tq < in.tq
    assert_success
    [[ "$stderr" =~ TQ_STANDIN_FAIL=copy:nine:\ not\ KIND:N ]] || fail "no word on a bad setting: $stderr"
}

@test "a kernel's illegal address is sticky: the tool ends with that one message, and every later call fails" {
    built cuda || skip "this build has no CUDA backend"
    tq-embed -m hash:16 "$ROOT_DIR/samples/docs.txt" > in.tq
    TQ_STANDIN_QUIET=1 TQ_STANDIN_FAIL=launch:1:700 run --separate-stderr \
        timeout 60 tq-simmat --device cuda --metric l2 -k 3 -o out.tq < in.tq
    [ "$status" -eq 1 ] || fail "exit $status: $stderr"
    [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ] || fail "more than one line: $stderr"
    [[ "$stderr" =~ ^tq-simmat:\ error:\ cuda:0:\ [a-zA-Z]+:\ CUDA_ERROR_ILLEGAL_ADDRESS ]] || fail "$stderr"
    [ ! -e out.tq ]
    # the stand-in's side: after the fault, a free and a sync fail too
    TQ_STANDIN_FAIL=launch:1:700 run --separate-stderr tq-simmat --device cuda --metric l2 -k 3 -o out.tq < in.tq
    [[ "$stderr" =~ injected:\ launch\ call\ 1\ fails\ with\ 700\ \(sticky\) ]] || fail "$stderr"
}

@test "fault sweep: tq-simmat top-k, threshold and dedup (CUDA and HIP)" {
    needs_numpy
    simmat_inputs
    sweep "cuda hip" -i q.tq out.tq tq-simmat --device @DEV@ --db db.tq -k 5 -o out.tq
    sweep cuda -i q.tq out.tq tq-simmat --device @DEV@ --db db.tq --metric l2 -k 5 -o out.tq
    sweep cuda -i q.tq out.tq tq-simmat --device @DEV@ --db db.tq --threshold 0.5 -o out.tq
    sweep "cuda hip" -i db.tq out.tq tq-simmat --device @DEV@ --dedup 0.95 -o out.tq
}

@test "fault sweep: tq-simmat over int8 and bit codes" {
    needs_numpy
    simmat_inputs
    tq-quantize --to int8 < db.tq > db8.tq
    tq-quantize --to int8 < q.tq > q8.tq
    tq-quantize --to bit < db.tq > db1.tq
    tq-quantize --to bit < q.tq > q1.tq
    sweep cuda -i q8.tq out.tq tq-simmat --device @DEV@ --db db8.tq --metric dot -k 7 -o out.tq
    sweep cuda -i q1.tq out.tq tq-simmat --device @DEV@ --db db1.tq --metric hamming -k 9 -o out.tq
}

@test "fault sweep: tq-embed with a BERT folder, graphs and bf16 products" {
    needs_torch
    py "$TESTS_DIR/lib/make_bert.py" m --pool mean --normalize --max-seq 16 --seed 11
    printf '%s\n' "the cat sat on the mat" "Hello world" "a longer line with more words" > in.txt
    sweep "cuda hip" out.tq tq-embed -m m --device @DEV@ --batch 2 -o out.tq in.txt
    sweep cuda out.tq tq-embed -m m --device @DEV@ --batch 2 --precision bf16 -o out.tq in.txt
}

@test "fault sweep: tq-attend, tq-score and tq-quantize" {
    needs_numpy
    py -c "
import numpy as np, tqstream
rng = np.random.default_rng(3)
x = rng.standard_normal((20, 16)).astype(np.float32)
g = (np.arange(20) // 7).astype(np.int64)
open('in.tq', 'wb').write(tqstream.array_frame('emb', x) + tqstream.array_frame('g', g))"
    sweep cuda -i in.tq out.tq tq-attend --device @DEV@ --self --heads 2 --consensus -o out.tq
    sweep cuda -i in.tq out.tq tq-attend --device @DEV@ --self --heads 1 --causal --group g -o out.tq
    py "$TESTS_DIR/lib/score_ref.py" gen . --d 16 --seed 3
    sweep cuda out.tq tq-score --device @DEV@ -m mlp.tq --consensus in.tq -o out.tq
    sweep cuda -i in.tq out.tq tq-quantize --device @DEV@ --to int8 -o out.tq
}

@test "fault sweep: tq-train (an MLP, f32 and bf16 products)" {
    needs_numpy
    py "$TESTS_DIR/lib/train_ref.py" data . softmax --n 120
    sweep cuda out.tq tq-train --device @DEV@ --model mlp --hidden 8 --epochs 2 --batch 32 -o out.tq in.tq
    sweep cuda out.tq tq-train --device @DEV@ --model mlp --hidden 8 --epochs 1 --batch 32 --precision bf16 -o out.tq in.tq
}

@test "fault sweep: tq-bench on the device (the GEMMs that once ended in a double free)" {
    export TQ_BENCH_SMALL=1 # the ceilings at a CPU's sizes: a GPU's take minutes here
    sweep cuda -t out.csv tq-bench --device @DEV@:0 --op matmul,matmul_f16 -n 64 -r 1 --min-time 1 --format csv -o out.csv
    sweep "cuda hip" out.txt tq-bench --check --device @DEV@:0 --op matmul,matmul_f16,attention,scale -n 64 -o out.txt
}
