#!/usr/bin/env bats
# Quantized scorers: tq-quantize on tq-train's models (int8, q8_0, q4_0, f16,
# bf16 weights) and tq-score -m on them, against tests/lib/qmodel_ref.py (the
# codes decoded in NumPy from man/tq-score.1, the forward pass in float64,
# the int8 products emulated exactly): scores within 1e-5 of the reference of
# the decoded model, decisions against the f32 model's on digits' 450 test
# rows, sizes, and the bad models.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    D="$BATS_TEST_TMPDIR"
    QREF="$TESTS_DIR/lib/qmodel_ref.py"
}

needs_digits() {
    VENV_PY="$ROOT_DIR/.venv/bin/python"
    [ -x "$VENV_PY" ] && "$VENV_PY" -c 'import sklearn' 2>/dev/null ||
        skip "scikit-learn missing from .venv (make deps-test installs it)"
    "$VENV_PY" "$TESTS_DIR/lib/train_ref.py" digits "$D"
}

# Whether the CPU has the int8 products auto takes (tq-score(1): AVX512-VNNI,
# with AVX512-BW; lib/cpu/gemm_i8.c).
native_int8() {
    grep -qw avx512_vnni /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo
}

# qcheck F32 CODE PRECISION AGREE MAXDIFF: quantize, score the test rows, check
# (auto on int8 weights: int8 products where the CPU has them, and the
# reference then emulates those)
qcheck() {
    local m=$1 code=$2 prec=$3
    tq-quantize --to "$code" -o "$D/q.tq" "$m"
    tq-score -v --precision "$prec" -m "$D/q.tq" -o "$D/out.tq" "$D/test.tq" 2> "$D/score.err"
    local int8=""
    [ "$code" = int8 ] && [ "$prec" = int8 ] && int8=--int8
    if [ "$code" = int8 ] && [ "$prec" = auto ]; then
        if native_int8; then
            int8=--int8
            grep -q 'i8 weights, int8 products' "$D/score.err" || fail "auto without int8 products: $(cat "$D/score.err")"
        else
            grep -q 'i8 weights, decoded to f32' "$D/score.err" || fail "auto with int8 products: $(cat "$D/score.err")"
        fi
    fi
    run py "$QREF" check "$m" "$D/q.tq" "$D/test.tq" "$D/out.tq" $int8 --tol 1e-5 \
        --agree "$4" --maxdiff "$5"
    echo "$(basename "$m") $code $prec: $output"
    [ "$status" -eq 0 ]
}

@test "digits softmax and MLP: int8, q8_0, f16, bf16 keep >= 99.5% of the f32 model's decisions, q4_0 >= 98%; scores as the reference decodes them" {
    needs_digits
    tq-train --model softmax --standardize --epochs 50 --lr 0.01 --l2 0.001 -o "$D/sm.tq" "$D/train.tq"
    tq-train --model mlp --hidden 128 --standardize --epochs 30 -o "$D/mlp.tq" "$D/train.tq"
    for m in "$D/sm.tq" "$D/mlp.tq"; do
        # the tolerances of tq-score(1), QUANTIZED MODELS
        qcheck "$m" int8 f32 0.995 0.05
        qcheck "$m" int8 int8 0.995 0.05
        qcheck "$m" int8 auto 0.995 0.05
        qcheck "$m" q8_0 auto 0.995 0.05
        qcheck "$m" q4_0 auto 0.98 0.25
        qcheck "$m" f16 auto 0.995 0.005
        qcheck "$m" bf16 auto 0.995 0.05
    done
}

@test "the kinds of tq-score's tests (linear, logistic, softmax, mlp of 3 layers, gelu) in int8, both products" {
    py "$TESTS_DIR/lib/score_ref.py" gen "$D" --d 16 --seed 3
    cp "$D/in.tq" "$D/test.tq"
    for m in linear logistic softmax mlp mlp3 mlp-gelu; do
        qcheck "$D/$m.tq" int8 f32 0 1 || { echo "model $m" >&2; return 1; }
        qcheck "$D/$m.tq" int8 int8 0 1 || { echo "model $m" >&2; return 1; }
        qcheck "$D/$m.tq" bf16 f32 0 1 || { echo "model $m" >&2; return 1; }
    done
}

@test "sizes: a 256-256-3 MLP's int8 file <= 0.27x the f32 file, q4_0 <= 0.16x" {
    py - "$D" <<'PYEOF'
import sys, numpy as np, tqstream as ts
r = np.random.default_rng(1)
x = r.standard_normal((600, 256)).astype(np.float32)
y = r.integers(0, 3, 600).astype(np.int64)
open(sys.argv[1] + "/big.tq", "wb").write(ts.array_frame("emb", x) + ts.array_frame("y", y))
PYEOF
    tq-train --model mlp --hidden 256 --standardize --epochs 2 -o "$D/m.tq" "$D/big.tq"
    tq-quantize --to int8 -o "$D/m8.tq" "$D/m.tq"
    tq-quantize --to q4_0 -o "$D/m4.tq" "$D/m.tq"
    f=$(stat -c %s "$D/m.tq") i=$(stat -c %s "$D/m8.tq") q=$(stat -c %s "$D/m4.tq")
    echo "f32 $f, int8 $i, q4_0 $q bytes"
    [ $((i * 100)) -le $((f * 27)) ]
    [ $((q * 100)) -le $((f * 16)) ]
    cp "$D/big.tq" "$D/test.tq"
    qcheck "$D/m.tq" int8 int8 0.99 1
}

@test "-v says the weights' code and how the products run" {
    py "$TESTS_DIR/lib/score_ref.py" gen "$D" --d 16 --seed 3
    tq-quantize --to int8 -o "$D/q.tq" "$D/mlp.tq"
    run --separate-stderr tq-score -v --precision int8 -m "$D/q.tq" -o "$D/o.tq" "$D/in.tq"
    [ "$status" -eq 0 ]
    [[ "$stderr" == *"model mlp 16-8-1 relu, output linear, i8 weights, int8 products"* ]]
    run --separate-stderr tq-score -v --precision f32 -m "$D/q.tq" -o "$D/o.tq" "$D/in.tq"
    [[ "$stderr" == *"i8 weights, decoded to f32"* ]]
    run --separate-stderr tq-quantize -v --to int8 -o "$D/q.tq" "$D/mlp.tq"
    [[ "$stderr" == *"model: 136 weights to int8"* ]]
}

# bad_model CODE TEXT PYTHON: a model written by PYTHON (frames list f) fails tq-score with CODE
bad_model() {
    local code=$1 text=$2
    py - "$D/bad.tq" "$D/q.tq" "$3" <<'PYEOF'
import sys, numpy as np, tqstream as ts
fr = {f["name"]: f for f in ts.read(open(sys.argv[2], "rb").read())}
def raw(name, dtype, dims, payload, meta=None):
    return ts.frame(name, dtype, dims, payload, meta)
def same(name):
    f = fr[name]
    return ts.frame(f["name"], f["dtype"], f["dims"], f["raw"], f["meta"] or None)
out = eval(sys.argv[3])
open(sys.argv[1], "wb").write(b"".join(out))
PYEOF
    run --separate-stderr tq-score -m "$D/bad.tq" -o "$D/o.tq" "$D/in.tq"
    echo "status $status: $stderr"
    [ "$status" -eq "$code" ]
    [[ "$stderr" == "tq-score: error: "*"$text"* ]]
    [ "$(wc -l <<<"$stderr")" -eq 1 ]
    [ ! -e "$D/o.tq" ]
}

@test "bad quantized models: a missing scale, shapes that do not fit, a shift out of range, a truncated file, codes tq-score cannot use" {
    py "$TESTS_DIR/lib/score_ref.py" gen "$D" --d 16 --seed 3
    tq-quantize --to int8 -o "$D/q.tq" "$D/mlp.tq"
    bad_model 65 'i8 weights "w1" need their scales "w1_scale" f32 [8]' \
        '[same(n) for n in ("model", "w1_shift", "w1", "b1", "w2_scale", "w2_shift", "w2", "b2") if n in fr]'
    bad_model 65 '"w1_scale" must be [8] to match "w1"' \
        '[same("model"), raw("w1_scale", "f32", [7], np.ones(7, np.float32).tobytes())] + [same(n) for n in ("w1", "b1", "w2_scale", "w2", "b2")] + ([same("w2_shift")] if "w2_shift" in fr else [])'
    bad_model 65 '"w1_shift" holds the shift 90, beyond -64..64' \
        '[same(n) for n in ("model", "w1_scale", "w1", "b1", "w2_scale", "w2", "b2")] + [raw("w1_shift", "i8", [16], np.full(16, 90, np.int8).tobytes())]'
    bad_model 65 '"w2" takes 16 inputs, but the layer before gives 8' \
        '[same(n) for n in ("model", "w1_scale", "w1", "b1", "w2_scale", "b2")] + [raw("w2", "i8", [1, 16], np.ones(16, np.int8).tobytes())]'
    bad_model 65 'side frame "w1_scale" must be f32 [out], not i8 of rank 1' \
        '[same(n) for n in ("model", "w1", "b1", "w2_scale", "w2", "b2")] + [raw("w1_scale", "i8", [8], np.ones(8, np.int8).tobytes())]'
    bad_model 65 'weight "b1" must be a float tensor, not i8' \
        '[same(n) for n in ("model", "w1_scale", "w1", "w2_scale", "w2", "b2")] + [raw("b1", "i8", [8], np.ones(8, np.int8).tobytes())]'
    bad_model 65 'weight "w1" must be a float tensor or i8, q8_0 or q4_0 codes, not bit' \
        '[same(n) for n in ("model", "b1", "w2_scale", "w2", "b2")] + [raw("w1", "bit", [8, 16], bytes(16))]'
    bad_model 65 'q8_0 weights "w1" hold their scales in their blocks: unexpected "w1_scale"' \
        '[same(n) for n in ("model", "w1_scale", "b1", "w2_scale", "w2", "b2")] + [raw("w1", "q8_0", [8, 32], bytes(8 * 34))]'
    # truncated: the stream's own error, exit 65
    head -c 700 "$D/q.tq" > "$D/cut.tq"
    run --separate-stderr tq-score -m "$D/cut.tq" -o "$D/o.tq" "$D/in.tq"
    [ "$status" -eq 65 ]
    [ "$(wc -l <<<"$stderr")" -eq 1 ]
    [[ "$stderr" == "tq-score: error: "* ]]
}

@test "tq-quantize on a model: codes it cannot write, weights already coded, widths q4_0 cannot take" {
    py "$TESTS_DIR/lib/score_ref.py" gen "$D" --d 16 --seed 3
    run --separate-stderr tq-quantize --to bit -o "$D/q.tq" "$D/mlp.tq"
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"is a model file: its weights take --to int8, q8_0, q4_0, f16 or bf16, not bit"* ]]
    run --separate-stderr tq-quantize --to int8 --name w1 -o "$D/q.tq" "$D/mlp.tq"
    [ "$status" -eq 2 ]
    run --separate-stderr tq-quantize --to int8 --ranges "$D/in.tq" -o "$D/q.tq" "$D/mlp.tq"
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"is a model file: --name, --ranges and --report are for vectors"* ]]
    # from a pipe too: the model is told by its first frame
    tq-quantize --to int8 < "$D/mlp.tq" > "$D/piped.tq"
    tq-quantize --to int8 -o "$D/file.tq" "$D/mlp.tq"
    cmp "$D/piped.tq" "$D/file.tq"
    run --separate-stderr tq-quantize --to q4_0 -o "$D/q.tq" "$D/mlp.tq"
    [ "$status" -eq 65 ]
    [[ "$stderr" == *'"w1": q4_0 weights need a multiple of 32 inputs, not 16 (int8 takes any)'* ]]
    [ ! -e "$D/q.tq" ]
    tq-quantize --to int8 -o "$D/q.tq" "$D/mlp.tq"
    run --separate-stderr tq-quantize --to int8 -o "$D/q2.tq" "$D/q.tq"
    [ "$status" -eq 65 ]
    [[ "$stderr" == *'"w1": the weights are i8 already: quantize the float model tq-train wrote'* ]]
    run --separate-stderr tq-score --precision int4 -m "$D/q.tq" "$D/in.tq"
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"--precision wants auto, f32 or int8, not 'int4'"* ]]
}

@test "every device: an int8 model's scores, both products, within 1e-5 of the reference (tq-score(1))" {
    py "$TESTS_DIR/lib/score_ref.py" gen "$D" --d 16 --seed 3
    cp "$D/in.tq" "$D/test.tq"
    tq-quantize --to int8 -o "$D/q.tq" "$D/mlp3.tq"
    all_devices
    for dev in $devices; do
        for p in int8 f32; do
            tq-score --device "$dev" --precision $p -m "$D/q.tq" -o "$D/out.tq" "$D/test.tq"
            int8=""
            [ $p = int8 ] && int8=--int8
            run py "$QREF" check "$D/mlp3.tq" "$D/q.tq" "$D/test.tq" "$D/out.tq" $int8 --tol 1e-5 --agree 0
            echo "$dev $p: $output"
            [ "$status" -eq 0 ]
        done
    done
}
