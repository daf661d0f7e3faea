#!/usr/bin/env bats
# The CUDA and HIP backends through real pipelines, on the tests' stand-in
# driver (tests/standin: the kernels of kernels/cuda run on the CPU, warps of
# 32 for CUDA and 64 for HIP) or, where TQ_GPU_REAL=1, on the machine's GPU:
# --list-devices, the ways a backend can be missing, and every tool with
# --device cuda and --device hip against --device cpu (and the float64
# reference where there is one). The op-by-op comparison is the cross-backend
# unit suite (tests/unit/test_ops.c), which make check also runs on both.
load helpers
bats_require_minimum_version 1.5.0

# use_standin: points the backends at the stand-in driver, or skips saying why.
# auto takes the GPU for any work (TQ_AUTO_MIN_FLOPS=0): these tests' work is
# small, and what they hold auto to is its GPU (device-choice.bats tests the rule).
use_standin() {
    export TQ_AUTO_MIN_FLOPS=0
    if [ "${TQ_GPU_REAL:-}" = 1 ]; then
        return 0
    fi
    [ -n "${TQ_STANDIN_LIB:-}" ] && [ -f "$TQ_STANDIN_LIB" ] ||
        skip "no stand-in driver (make standin builds it; it needs g++)"
    export TQ_CUDA_DRIVER="$TQ_STANDIN_LIB" TQ_CUBLAS="$TQ_STANDIN_LIB"
    export TQ_HIP_RUNTIME="$TQ_STANDIN_LIB" TQ_ROCBLAS="$TQ_STANDIN_LIB"
}

# On a GPU (TQ_GPU_REAL=1), the backends that open a device here, read before
# a test hides any runtime: a machine has NVIDIA's or AMD's, seldom both.
[ "${TQ_GPU_REAL:-}" != 1 ] || real_backends=$(tq-cat --list-devices | sed -n 's/^\(cuda\|hip\):0 .*/\1/p')

# The backends this build has (nvcc and hipcc present at build time).
built_backends() {
    local b
    for b in cuda hip; do
        [ "${TQ_GPU_REAL:-}" != 1 ] || grep -qx "$b" <<< "$real_backends" || continue
        tq-cat --list-devices | grep -q "^$b .*not built" || echo "$b"
    done
}

needs_gpu() {
    use_standin
    [ "${TQ_GPU_REAL:-}" != 1 ] || [ -n "$real_backends" ] || skip "TQ_GPU_REAL=1, but no cuda:0 or hip:0 opens here"
    [ -n "$(built_backends)" ] || skip "this build has neither CUDA nor HIP (nvcc and hipcc were missing)"
}

@test "--list-devices: cuda:0 and hip:0 with name, architecture, units, warp width, driver and BLAS" {
    needs_gpu
    run tq-cat --list-devices
    assert_success
    for b in $(built_backends); do
        line=$(grep "^$b:0 " <<< "$output") || fail "no $b:0 line: $output"
        [[ "$line" =~ ^$b:0\ +.+,\ [0-9.]+\ (MiB|GiB),\ (sm_[0-9]+|gfx[0-9a-f]+),\ [0-9]+\ (SMs|CUs),\ (warp|wavefront)\ (32|64),\ .*driver.*,\ (cuBLAS|rocBLAS|own\ kernels) ]] ||
            fail "malformed line: $line"
    done
    if [ "${TQ_GPU_REAL:-}" != 1 ]; then # the stand-in's widths: CDNA wavefronts for HIP
        grep -q '^cuda:0 .*, warp 32, ' <<< "$output" || built_backends | grep -qv cuda
        grep -q '^hip:0 .*, wavefront 64, ' <<< "$output" || built_backends | grep -qv hip
    fi
}

@test "no runtime: --list-devices says which library is missing, --device fails (exit 1), auto uses another device" {
    needs_gpu
    export TQ_CUDA_DRIVER=/nonexistent/libcuda.so.1 TQ_HIP_RUNTIME=/nonexistent/libamdhip64.so
    list=$(tq-cat --list-devices)
    for b in $(built_backends); do
        grep -qE "^$b +unavailable: /nonexistent/lib.*not found" <<< "$list" || fail "$b: $list"
        run -1 tq-cat --device "$b" /dev/null
        assert_output --regexp "^tq-cat: error: $b: /nonexistent/.* not found"
    done
    printf 'a b\n' > "$BATS_TEST_TMPDIR/in.txt"
    run tq-embed -v -m hash:8 --device auto -o "$BATS_TEST_TMPDIR/out.tq" "$BATS_TEST_TMPDIR/in.txt"
    assert_success
    refute_output --partial "cuda:"
    refute_output --partial "hip:"
}

@test "a BLAS library that is there but does not load: own kernels, and dlopen's reason" {
    needs_gpu
    [ "${TQ_GPU_REAL:-}" != 1 ] || skip "the stand-in's BLAS is replaced here"
    printf 'not a library\n' > "$BATS_TEST_TMPDIR/libblas.so"
    TQ_CUBLAS="$BATS_TEST_TMPDIR/libblas.so" TQ_ROCBLAS="$BATS_TEST_TMPDIR/libblas.so" \
        run -0 tq-cat --list-devices
    for b in $(built_backends); do
        assert_line --regexp "^$b:0 .*, own kernels \($BATS_TEST_TMPDIR/libblas.so: .*\)$"
    done
}

@test "a driver too old for this build's code: --device cuda fails at open, saying so" {
    needs_gpu
    [ "${TQ_GPU_REAL:-}" != 1 ] || skip "the stand-in plays the old driver"
    built_backends | grep -q cuda || skip "no CUDA backend in this build"
    printf 'a b\n' > "$BATS_TEST_TMPDIR/in.txt"
    TQ_STANDIN_DRIVER_VERSION=11000 run -1 tq-embed -m hash:8 --device cuda -o "$BATS_TEST_TMPDIR/o.tq" "$BATS_TEST_TMPDIR/in.txt"
    assert_line --regexp '^tq-embed: error: cuda:0: cuModuleLoadData: CUDA_ERROR_UNSUPPORTED_PTX_VERSION \(loading the kernels: a driver too old for this build.*\)$'
    [ ! -e "$BATS_TEST_TMPDIR/o.tq" ]
}

@test "a device index past the last is exit 1 naming how many there are" {
    needs_gpu
    for b in $(built_backends); do
        run -1 tq-cat --device "$b:3" /dev/null
        assert_output --regexp "$b: no device 3 \(there is 1\)"
    done
}

# needs_venv: the reference tokenizer's Python (.venv), or skips saying why.
needs_venv() {
    VENV_PY="$ROOT_DIR/.venv/bin/python"
    [ -x "$VENV_PY" ] || skip "no .venv (make deps-test makes it): the reference tokenizer is missing"
    "$VENV_PY" -c 'import transformers, torch' 2>/dev/null || skip "transformers or torch missing from .venv"
}

# embed_agrees DIR N: tq-embed -m DIR of $T/in.txt (N lines) on the CPU and
# on each backend (-v into $T/BACKEND.err), every row within cosine 0.99999
# of $T/ref.txt and of the CPU's: tq-embed's tolerance (tq-embed.1) with the
# float64 reference, on every device.
embed_agrees() {
    tq-embed -m "$1" --device cpu --batch 3 "$T/in.txt" | tq-cat -t tsv --name emb |
        tail -n +2 | tr '\t' ' ' > "$T/cpu.txt"
    for b in $(built_backends); do
        tq-embed -v -m "$1" --device "$b" --batch 3 "$T/in.txt" 2> "$T/$b.err" |
            tq-cat -t tsv --name emb | tail -n +2 | tr '\t' ' ' > "$T/$b.txt"
        [ "$(wc -l < "$T/$b.txt")" -eq "$2" ]
        run py "$TESTS_DIR/lib/cosine.py" "$T/ref.txt" "$T/$b.txt" 0.99999
        assert_success
        run py "$TESTS_DIR/lib/cosine.py" "$T/cpu.txt" "$T/$b.txt" 0.99999
        assert_success
    done
}

@test "tq-embed -m FOLDER --device cuda/hip: rows agree with the reference and with --device cpu" {
    needs_gpu
    needs_venv
    T="$BATS_TEST_TMPDIR"
    needs_torch
    py "$TESTS_DIR/lib/make_bert.py" "$T/m" --pool mean --normalize --max-seq 32 --seed 11
    printf '%s\n' "the cat sat on the mat" "Hello world" "café naïve résumé" "中国人 日本語" \
        "a much longer line with many words to fill the sequence up to its limit and past it" > "$T/in.txt"
    "$VENV_PY" "$TESTS_DIR/lib/bert_ref.py" "$T/m" < "$T/in.txt" > "$T/ref.txt" 2>/dev/null
    embed_agrees "$T/m" 5
}

# MPNet's relative position bias is the attention op's score bias, which the
# CUDA/HIP kernels add themselves (kernels/cuda/attention*.cu): rows against
# the float64 reference (tests/lib/encoder_ref.py, encoders.bats' tolerance)
# and the CPU's, and -v names no attention run through the host.
@test "tq-embed of an MPNet model --device cuda/hip: the score bias on the device, rows agree with the reference" {
    needs_gpu
    needs_venv
    T="$BATS_TEST_TMPDIR"
    "$VENV_PY" "$TESTS_DIR/lib/make_encoder.py" "$T/m" --arch mpnet --pool mean --normalize \
        --max-seq 40 --seed 9 2>/dev/null
    printf '%s\n' "the cat sat on the mat" "hello world music" "café naïve 中国人" \
        "paris london tokyo model vector search embedding sentence hello night food guitar the a cat dog sat mat running quickly house city world music book read" > "$T/in.txt"
    "$VENV_PY" "$TESTS_DIR/lib/encoder_ref.py" "$T/m" < "$T/in.txt" > "$T/ref.txt" 2>/dev/null
    embed_agrees "$T/m" 4
    for b in $(built_backends); do
        ! grep -q 'ran on the host.*attention' "$T/$b.err" || fail "$b: $(cat "$T/$b.err")"
    done
}

# tq-embed --precision bf16/f16 (tq-embed.1): on CUDA and HIP the layers'
# weights and each product's left operand are rounded to bf16 (8 significant
# bits) or f16 (11), the sums stay f32. The man page promises cosine >= 0.999
# with the f32 rows: a relative error e of a row costs about e^2/2 of cosine,
# so 0.999 allows e near 0.04, some ten times what bf16 rounding through the
# layers gives (measured: 0.99999 bf16, 0.9999999 f16 on this model, 0.99998
# bf16 on all-MiniLM-L6-v2); a wrong operand, weight or row is far below (two
# different lines of this model score under 0.85).
@test "tq-embed -m FOLDER --device cuda/hip --precision bf16 and f16: within cosine 0.999 of the CPU's f32 rows; bf16/f16 GEMMs, no fallback note; int8: f32 and a note" {
    needs_gpu
    needs_numpy
    T="$BATS_TEST_TMPDIR"
    needs_torch
    py "$TESTS_DIR/lib/make_bert.py" "$T/m" --pool mean --normalize --max-seq 32 --seed 11
    printf '%s\n' "the cat sat on the mat" "Hello world" "café naïve résumé" "中国人 日本語" \
        "a much longer line with many words to fill the sequence up to its limit and past it" > "$T/in.txt"
    tq-embed -m "$T/m" --device cpu --batch 3 "$T/in.txt" | tq-cat -t tsv --name emb |
        tail -n +2 | tr '\t' ' ' > "$T/cpu.txt"
    # the model's 2 layers make 6 products each (q, k, v, output, intermediate,
    # output): 24 GEMMs over the 2 batches of 3 and 2 lines
    for b in $(built_backends); do
        for p in f32 bf16 f16; do
            run --separate-stderr env TQ_STANDIN_QUIET=0 TQ_STANDIN_TRACE_GEMM=1 \
                tq-embed -v -m "$T/m" --device "$b" --batch 3 --precision "$p" -o "$T/$b.$p.tq" "$T/in.txt"
            assert_success
            [[ "$stderr" != *"f32 products on"* ]] || fail "$b $p: a fallback note: $stderr"
            tq-cat -t tsv --name emb "$T/$b.$p.tq" | tail -n +2 | tr '\t' ' ' > "$T/$b.$p.txt"
            [ "$(wc -l < "$T/$b.$p.txt")" -eq 5 ]
            run py "$TESTS_DIR/lib/cosine.py" "$T/cpu.txt" "$T/$b.$p.txt" 0.999
            assert_success
            # the stand-in's BLAS sees the operands' own types (a real GPU's
            # tensor-core GEMM), not f32 copies; f32 asks for no 16-bit GEMM
            if [ "${TQ_GPU_REAL:-}" != 1 ] && tq-cat --list-devices | grep -q "^$b:0 .*BLAS"; then
                [ "$(grep -c "tq-standin: gemm $p x $p -> f32" <<< "$stderr")" -eq 24 ] ||
                    fail "$b $p: not 24 $p x $p GEMMs: $stderr"
                if [ "$p" = f32 ]; then
                    [ "$(grep -cE "tq-standin: gemm (bf16|f16) " <<< "$stderr")" -eq 0 ] ||
                        fail "$b f32: a 16-bit GEMM: $stderr"
                fi
            fi
        done
        # int8 products are the CPU's (AVX512-VNNI): on a GPU, f32's bytes
        # and one -v note
        run --separate-stderr tq-embed -v -m "$T/m" --device "$b" --batch 3 --precision int8 \
            -o "$T/$b.int8.tq" "$T/in.txt"
        assert_success
        [ "$(grep -c -- "--precision int8: f32 products on $b" <<< "$stderr")" -eq 1 ] ||
            fail "$b int8: not one fallback note: $stderr"
        cmp "$T/$b.f32.tq" "$T/$b.int8.tq"
    done
}

# CUDA and HIP graphs: tq-embed records its encoder's layers once per batch
# shape and replays them for later batches of that shape; the replay runs the
# same kernels on the same tensors, so the bytes equal those of the ops run
# one by one (TQ_GRAPHS=0), and -v counts the graphs and their launches.
@test "tq-embed --device cuda/hip: layers recorded once per batch shape and replayed, same bytes as without graphs" {
    needs_gpu
    T="$BATS_TEST_TMPDIR"
    needs_torch
    py "$TESTS_DIR/lib/make_bert.py" "$T/m" --pool mean --normalize --max-seq 32 --seed 11
    # 8 lines of 4 words, then 2 of 9: batches of 2 give 4 of one shape, 1 of another
    for i in 1 2 3 4 5 6 7 8; do echo "w$i x y z"; done > "$T/in.txt"
    printf '%s\n' "a b c d e f g h i" "j k l m n o p q r" >> "$T/in.txt"
    for b in $(built_backends); do
        run --separate-stderr tq-embed -v -m "$T/m" --device "$b" --batch 2 -o "$T/g.tq" "$T/in.txt"
        assert_success
        [[ "$stderr" == *"$b:0: 2 graphs recorded, 5 launches"* ]] || fail "$b: $stderr"
        TQ_GRAPHS=0 run --separate-stderr tq-embed -v -m "$T/m" --device "$b" --batch 2 -o "$T/n.tq" "$T/in.txt"
        assert_success
        [[ "$stderr" != *"graph"* ]] || fail "$b: TQ_GRAPHS=0 still recorded: $stderr"
        cmp "$T/g.tq" "$T/n.tq" || fail "$b: graphs changed the bytes"
    done
}

# tq-attend.1: across devices results agree to about 1e-6 relative; 1e-5 of
# the largest magnitude leaves room for f32 sums in other orders and still
# fails on a wrong mask, scale or weight (those move values by 1e-2 or more).
@test "tq-attend --device cuda/hip agrees with --device cpu (causal, groups, consensus)" {
    needs_gpu
    needs_numpy
    T="$BATS_TEST_TMPDIR"
    py -c "
import numpy as np, tqstream
rng = np.random.default_rng(3)
x = rng.standard_normal((40, 24)).astype(np.float32)
g = (np.arange(40) // 7).astype(np.int64)
open('$T/in.tq', 'wb').write(tqstream.array_frame('emb', x) + tqstream.array_frame('g', g))"
    for opts in "--heads 2 --consensus" "--heads 3 --causal" "--heads 1 --group g"; do
        for dev in cpu $(built_backends); do
            tq-attend --device "$dev" --self $opts < "$T/in.tq" > "$T/$dev.tq"
        done
        for b in $(built_backends); do
            run py "$TESTS_DIR/lib/same_frames.py" "$T/cpu.tq" "$T/$b.tq" 1e-5
            assert_output "ok"
        done
    done
}

# tq-simmat.1 (DETERMINISM): top-k, threshold and dedup score every pair that
# decides something exactly on the host, so every device writes the CPU's bytes.
@test "tq-simmat --device cuda/hip: top-k (f32 and bf16 ranking), threshold and dedup are the CPU's bytes" {
    needs_gpu
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    simmat_inputs
    for b in $(built_backends); do
        for m in cosine dot l2; do
            for dev in cpu "$b"; do
                tq-simmat --device "$dev" --db db.tq --metric "$m" -k 5 < q.tq > "$dev.tq"
            done
            cmp cpu.tq "$b.tq" || fail "$b: -k 5 --metric $m differs"
            # bf16 ranking products (the BLAS's bf16 GEMM: tensor cores),
            # the wider bound of simtopk_exact.c: the same bytes
            run --separate-stderr tq-simmat -v --precision bf16 --device "$b" --db db.tq --metric "$m" \
                -k 5 -o "$b-bf16.tq" q.tq
            assert_success
            [[ "$stderr" != *"f32 products on"* ]] || fail "$b: bf16 ranking refused: $stderr"
            cmp cpu.tq "$b-bf16.tq" || fail "$b: --precision bf16 -k 5 --metric $m differs"
        done
        for dev in cpu "$b"; do
            tq-simmat --device "$dev" --db db.tq --metric cosine --threshold 0.5 < q.tq > "$dev.tq"
            tq-simmat --device "$dev" --dedup 0.95 < db.tq > "$dev-dd.tq"
            # the device lists each query's candidate rows (search.c): past
            # 256 of them (a low threshold) the row comes back whole; L2's
            # lists are of 2 q.x - ||x||^2; the input with itself
            tq-simmat --device "$dev" --db db.tq --metric cosine --threshold -0.5 < q.tq > "$dev-low.tq"
            tq-simmat --device "$dev" --metric l2 --threshold -30 < db.tq > "$dev-l2.tq"
        done
        cmp cpu.tq "$b.tq" || fail "$b: --threshold differs"
        cmp cpu-low.tq "$b-low.tq" || fail "$b: --threshold -0.5 differs"
        cmp cpu-l2.tq "$b-l2.tq" || fail "$b: --metric l2 --threshold -30 differs"
        cmp cpu-dd.tq "$b-dd.tq" || fail "$b: --dedup differs"
    done
}

# dedup.c: within a batch, each row's 16 best partners come from one search
# of the batch with itself, and a row with more partners than that (the 30
# copies of 10 rows here) is decided by the exact loop; 20 more rows have 3
# copies each (decided by their lists), 40 are distinct. The kept rows are
# the CPU's bytes and as many as a float64 greedy dedup keeps.
@test "tq-simmat --device cuda/hip --dedup: duplicates inside one batch, lists and their overflow" {
    needs_gpu
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    py -c "
import numpy as np, tqstream as t
r = np.random.default_rng(11)
a, b, c = (r.standard_normal((n, 24)).astype(np.float32) for n in (10, 20, 40))
x = np.concatenate([np.tile(a, (30, 1)), np.tile(b, (4, 1)), c])[r.permutation(420)]
open('one.tq', 'wb').write(t.array_frame('emb', x))
u = x.astype(np.float64) / np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
kept = []
for i in range(len(u)):
    if not any(u[i] @ u[j] >= 0.95 for j in kept):
        kept.append(i)
print(len(kept))" > want
    [ "$(cat want)" -eq 70 ]
    tq-simmat --device cpu --dedup 0.95 < one.tq > cpu.tq
    for b in $(built_backends); do
        tq-simmat --device "$b" --dedup 0.95 < one.tq > "$b.tq"
        cmp cpu.tq "$b.tq" || fail "$b: --dedup differs from the CPU"
        [ "$(tq-cat --name emb -t tsv < "$b.tq" | tail -n +2 | wc -l)" -eq 70 ] || fail "$b: not 70 rows kept"
    done
}

# The full matrix is each device's f32 product (tq-simmat.1: within
# d 2^-24 |q||x| of the exact score; L2 within d 2^-24 (|q| + |x|)^2): two
# devices lie within twice that of each other; a wrong operand misses by far.
@test "tq-simmat --device cuda/hip: the full matrix within the f32 product's bound of the CPU's" {
    needs_gpu
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    simmat_inputs
    for b in $(built_backends); do
        for m in cosine l2; do
            for dev in cpu "$b"; do
                tq-simmat --device "$dev" --db db.tq --metric "$m" < q.tq > "$dev.tq"
            done
            run py -c "
import numpy as np, tqstream as t
def get(p, name):
    return np.concatenate([t.to_numpy(f) for f in t.read(open(p, 'rb').read()) if f['name'] == name])
q, x = get('q.tq', 'emb').astype(np.float64), get('db.tq', 'emb').astype(np.float64)
if '$m' == 'cosine':
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
nq, nx = np.linalg.norm(q, axis=1)[:, None], np.linalg.norm(x, axis=1)[None, :]
size = (nq + nx) ** 2 if '$m' == 'l2' else nq * nx
bound = 2 * q.shape[1] * 2.0 ** -24 * size
a, c = get('cpu.tq', 'sim'), get('$b.tq', 'sim')
assert a.shape == c.shape == (50, 600), (a.shape, c.shape)
err = np.abs(a.astype(np.float64) - c)
assert (err <= bound).all(), ('$m', float((err / bound).max()))
print('ok')"
            assert_output "ok"
        done
    done
}

# tq-score's models run as products and activations on the device; its
# scores agree with the float64 reference (tests/lib/score_ref.py, the
# tolerance tq-score.bats uses) on every device.
@test "tq-score --device cuda/hip: an MLP model's scores match the float64 reference" {
    needs_gpu
    needs_numpy
    D="$BATS_TEST_TMPDIR"
    py "$TESTS_DIR/lib/score_ref.py" gen "$D" --d 16 --seed 3
    for b in $(built_backends); do
        tq-score --device "$b" -m "$D/mlp.tq" --consensus "$D/in.tq" -o "$D/out.tq"
        run py "$TESTS_DIR/lib/score_ref.py" check "$D" "$D/out.tq" -m "$D/mlp.tq" --consensus
        assert_success
    done
}

@test "tq-train --device cuda/hip, f32, bf16 and f16: the CPU's model to f32 rounding; bf16/f16 products reach the BLAS as such" {
    needs_gpu
    needs_numpy
    D="$BATS_TEST_TMPDIR"
    py "$TESTS_DIR/lib/train_ref.py" data "$D" softmax --n 300
    for p in f32 bf16 f16; do
        opts=(--precision "$p" --model mlp --hidden 24 --epochs 3 --batch 32)
        tq-train --device cpu "${opts[@]}" -o "$D/cpu.tq" "$D/in.tq"
        for b in $(built_backends); do
            run --separate-stderr env TQ_STANDIN_QUIET=0 TQ_STANDIN_TRACE_GEMM=1 \
                tq-train --device "$b" "${opts[@]}" -o "$D/$b.tq" "$D/in.tq"
            assert_success
            # 30 steps of products summed in another order: each weight within
            # 1e-4 of the largest (a wrong operand type is off by O(1))
            run py - "$D/cpu.tq" "$D/$b.tq" <<'PYEOF'
import sys, numpy as np, tqstream as ts
m = [{f["name"]: ts.to_numpy(f) for f in ts.read(open(p, "rb").read())} for p in sys.argv[1:]]
for k, a in m[0].items():
    if a.dtype.kind == "f":
        err = float(np.abs(m[1][k] - a).max() / max(np.abs(a).max(), 1e-30))
        assert err < 1e-4, (k, err)
PYEOF
            assert_success
            # the stand-in's library sees the operands' own types (the
            # tensor-core GEMM of a real GPU), not f32 copies of them
            if [ "${TQ_GPU_REAL:-}" != 1 ] && tq-cat --list-devices | grep -q "^$b:0 .*BLAS"; then
                grep -q "gemm $p x $p -> f32" <<<"$stderr" || fail "$b $p: no $p GEMM: $stderr"
            fi
        done
    done
}

@test "-v names the ops that ran on the host for want of a kernel on the device" {
    needs_gpu
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    simmat_inputs
    for b in $(built_backends); do
        run --separate-stderr tq-simmat -v --device "$b" --db db.tq -k 700 -o out.tq < q.tq
        assert_success
        # k over the device's 256 per row: topk or simtopk goes through the host
        [[ "$stderr" =~ $b:0:\ ran\ on\ the\ host\ \(no\ kernel\ on\ this\ device\):\ .*topk ]] ||
            fail "no host-path note in: $stderr"
        # an ordinary k: the similarity top-k runs on the device (tq.7)
        run --separate-stderr tq-simmat -v --device "$b" --db db.tq -k 5 -o out.tq < q.tq
        assert_success
        [[ ! "$stderr" =~ ran\ on\ the\ host.*simtopk ]] || fail "simtopk went through the host: $stderr"
    done
}
