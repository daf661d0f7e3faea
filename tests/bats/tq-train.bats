#!/usr/bin/env bats
# tq-train against independent references: gradients against float64 finite
# differences (tests/tools/train-grad.c), optimizer steps and the saved model
# against float64 NumPy (tests/lib/train_ref.py), scikit-learn's
# LogisticRegression on digits, thread byte identity, and bad input.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    D="$BATS_TEST_TMPDIR"
    REF="$TESTS_DIR/lib/train_ref.py"
}

# needs_sklearn: the digits tests need scikit-learn (its data and its model)
needs_sklearn() {
    VENV_PY="$ROOT_DIR/.venv/bin/python"
    [ -x "$VENV_PY" ] && "$VENV_PY" -c 'import sklearn' 2>/dev/null ||
        skip "scikit-learn missing from .venv (make deps-test installs it)"
    "$VENV_PY" "$REF" digits "$D"
}

@test "gradients of every model x loss x activation (and bf16, f16 products) against float64 finite differences" {
    run "$TQ_TEST_TOOLS/train-grad" 3
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(grep -c '^ok ' <<<"$output")" -eq 31 ]
}

# steps LOSS OPTION...: trains on small data with one full batch an epoch and
# compares the weights with float64 NumPy steps of the same optimizer
steps() {
    local loss=$1 std=
    shift
    case " $* " in *" --standardize "*) std=--std ;; esac
    py "$REF" data "$D" "$loss" $std
    tq-train "$@" --epochs 3 --batch 100 -o "$D/m.tq" "$D/in.tq"
    run py "$REF" steps "$D" "$D/m.tq" "$@" --epochs 3
    [ "$status" -eq 0 ] || { echo "$* : $output" >&2; return 1; }
}

@test "optimizer steps against float64 NumPy: sgd, adam, adamw; schedules, warm-up, l2" {
    steps mse --model linear --optimizer sgd --lr 0.05
    steps mse --model linear --optimizer adam --lr 0.1 --schedule cosine --warmup 1 --standardize
    steps logistic --model logistic --optimizer adamw --lr 0.05 --weight-decay 0.1 --l2 0.01
    steps softmax --model softmax --optimizer sgd --momentum 0.5 --schedule linear --l2 0.1
    steps listwise --model linear --loss listwise --optimizer adam --lr 0.05
}

@test "tq-score gives the float64 forward of the saved model (standardization folded in)" {
    py "$REF" data "$D" softmax --std
    py - "$D" <<'PYEOF'
import sys, numpy as np, tqstream as ts
d = sys.argv[1]
f = {x["name"]: ts.to_numpy(x) for x in ts.read(open(d + "/in.tq", "rb").read())}
y = f["y"]
open(d + "/bin.tq", "wb").write(ts.array_frame("emb", f["emb"]) + ts.array_frame("y", (y == 1).astype(np.float32)))
PYEOF
    for m in "--model mlp --hidden 8,5 --activation gelu" "--model mlp --hidden 6 --activation tanh" \
             "--model softmax"; do
        tq-train $m --standardize --epochs 5 --batch 8 -o "$D/m.tq" "$D/in.tq"
        tq-score -m "$D/m.tq" "$D/in.tq" -o "$D/s.tq"
        py "$REF" forward "$D/m.tq" "$D/in.tq" "$D/s.tq" || { echo "$m" >&2; return 1; }
    done
    for m in "--model logistic" "--model mlp --hidden 4 --activation sigmoid --loss logistic" \
             "--model linear"; do
        tq-train $m --standardize --epochs 5 --batch 8 -o "$D/m.tq" "$D/bin.tq"
        tq-score -m "$D/m.tq" "$D/bin.tq" -o "$D/s.tq"
        py "$REF" forward "$D/m.tq" "$D/bin.tq" "$D/s.tq" || { echo "$m" >&2; return 1; }
    done
}

@test "softmax regression on standardized digits: within 0.01 of scikit-learn's accuracy" {
    needs_sklearn
    # --l2 0.001: about the penalty of scikit-learn's default C = 1 (1 / 1347 rows)
    tq-train --model softmax --standardize --epochs 50 --lr 0.01 --l2 0.001 -o "$D/m.tq" "$D/train.tq"
    run "$VENV_PY" "$REF" accuracy "$D/m.tq" "$D" --sklearn
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "a small model's products never load OpenBLAS (its load would be a fifth of the run); a big product does" {
    py "$REF" data "$D" softmax --n 500
    # the dynamic loader names every library it opens (LD_DEBUG=files)
    LD_DEBUG=files tq-train --device cpu --model softmax --epochs 2 -o "$D/m.tq" "$D/in.tq" 2>"$D/ld.txt"
    [ "$(grep -c 'file=libopenblas' "$D/ld.txt")" -eq 0 ]
    # 300 x 256 features into 256 hidden units: 20M multiply-adds a batch
    py - "$D" <<'PYEOF'
import sys, numpy as np, tqstream as ts
r = np.random.default_rng(1)
x = r.standard_normal((300, 256)).astype(np.float32)
y = r.integers(0, 3, 300).astype(np.int64)
open(sys.argv[1] + "/big.tq", "wb").write(ts.array_frame("emb", x) + ts.array_frame("y", y))
PYEOF
    LD_DEBUG=files tq-train --device cpu --model mlp --hidden 256 --batch 300 --epochs 1 \
        -o "$D/m.tq" "$D/big.tq" 2>"$D/ld.txt"
    grep -q 'file=libopenblas' "$D/ld.txt" || skip "OpenBLAS is not installed"
}

@test "an MLP on digits reaches 0.96 test accuracy" {
    needs_sklearn
    tq-train --model mlp --hidden 128 --standardize --epochs 30 -o "$D/m.tq" "$D/train.tq"
    run "$VENV_PY" "$REF" accuracy "$D/m.tq" "$D"
    echo "$output"
    [ "$status" -eq 0 ]
    awk '{ exit !($2 >= 0.96) }' <<<"$output"
}

@test "early stopping keeps the best epoch's model" {
    needs_sklearn
    run --separate-stderr tq-train -v --model softmax --epochs 40 --lr 0.05 --valid "$D/test.tq" \
        --patience 2 -o "$D/m.tq" "$D/train.tq"
    [ "$status" -eq 0 ]
    echo "$stderr"
    grep -q "stopped early" <<<"$stderr"
    # the best accuracy in the table is the saved model's (float64 forward)
    best=$(awk '$NF == "*" { b = $(NF-3) } END { print b }' <<<"$stderr")
    got=$("$VENV_PY" "$REF" accuracy "$D/m.tq" "$D" | awk '{ print $2 }')
    awk -v a="$best" -v b="$got" 'BEGIN { exit !(a - b < 1e-4 && b - a < 1e-4) }'
}

@test "the same model bytes whatever --threads" {
    py "$REF" data "$D" softmax
    for t in 1 2 4; do
        tq-train --threads $t --model mlp --hidden 64,32 --activation gelu --epochs 3 --batch 7 \
            --valid "$D/in.tq" --patience 5 -o "$D/t$t.tq" "$D/in.tq"
    done
    cmp "$D/t1.tq" "$D/t2.tq"
    cmp "$D/t1.tq" "$D/t4.tq"
}

@test "features in any of tq-quantize's codes train the model their values (decoded by NumPy) train" {
    # 200 rows of 64 (q8_0 and q4_0 want rows of 32k), in batches of 70
    py -c '
import sys, numpy as np, tqstream as t
rng = np.random.default_rng(3)
x = rng.standard_normal((200, 64)).astype(np.float32)
y = (x[:, :3].argmax(axis=1)).astype(np.int64)
open(sys.argv[1], "wb").write(b"".join(t.array_frame("emb", x[i:i + 70]) + t.array_frame("y", y[i:i + 70])
                                       for i in range(0, 200, 70)))' "$D/in.tq"
    QR="$TESTS_DIR/lib/quantref.py"
    for c in f16 bf16 int8 uint8 int8r q8_0 q4_0 bit; do
        case $c in
        uint8) tq-quantize --to uint8 --ranges auto "$D/in.tq" > "$D/c.tq" ;;
        int8r) tq-quantize --to int8 --ranges auto "$D/in.tq" > "$D/c.tq" ;;
        *) tq-quantize --to "$c" < "$D/in.tq" > "$D/c.tq" ;;
        esac
        py "$QR" decode "$D/c.tq" "$D/f.tq"
        tq-train --model mlp --hidden 8 --epochs 2 --batch 16 --valid "$D/c.tq" -o "$D/a.tq" "$D/c.tq"
        tq-train --model mlp --hidden 8 --epochs 2 --batch 16 --valid "$D/f.tq" -o "$D/b.tq" "$D/f.tq"
        cmp "$D/a.tq" "$D/b.tq"
    done
    # named with --x, the side frames follow the name
    tq-train --x emb --model mlp --hidden 8 --epochs 2 --batch 16 --valid "$D/c.tq" -o "$D/a.tq" "$D/c.tq"
    cmp "$D/a.tq" "$D/b.tq"
}

@test "listwise groups: the loss within each group; every group needs a row marked 1" {
    py "$REF" data "$D" listwise
    tq-train --model mlp --hidden 5 --loss listwise --epochs 2 --batch 3 -o "$D/m.tq" "$D/in.tq"
    [ -s "$D/m.tq" ]
    py - "$D/in.tq" "$D/bad.tq" <<'PYEOF'
import sys, numpy as np, tqstream as ts
f = {x["name"]: ts.to_numpy(x) for x in ts.read(open(sys.argv[1], "rb").read())}
y = f["y"].copy(); g = f["group"]
y[g == g[3]] = 0
open(sys.argv[2], "wb").write(ts.array_frame("group", g) + ts.array_frame("emb", f["emb"]) + ts.array_frame("y", y))
PYEOF
    run --separate-stderr tq-train --model linear --loss listwise -o "$D/x.tq" "$D/bad.tq"
    [ "$status" -eq 65 ]
    [[ "$stderr" == *"group -13 (rows 3..7) has no row marked 1"* ]]
    [ ! -e "$D/x.tq" ]
    run --separate-stderr tq-train --model linear --loss listwise --group none -o "$D/x.tq" "$D/in.tq"
    [ "$status" -eq 65 ]
}

# bad FILE CODE TEXT OPTION...: tq-train fails with CODE and one line holding TEXT
bad() {
    local f=$1 code=$2 text=$3
    shift 3
    run --separate-stderr tq-train "$@" -o "$D/out.tq" "$f"
    [ "$status" -eq "$code" ] || { echo "status $status: $stderr" >&2; return 1; }
    [ "$(wc -l <<<"$stderr")" -eq 1 ] || { echo "$stderr" >&2; return 1; }
    [[ "$stderr" == "tq-train: error: "*"$text"* ]] || { echo "$stderr" >&2; return 1; }
    [ ! -e "$D/out.tq" ]
}

@test "bad input: one line, the right exit status, no output file" {
    py - "$D" <<'PYEOF'
import sys, numpy as np, tqstream as ts
d = sys.argv[1]
x = np.arange(12, dtype=np.float32).reshape(4, 3)
y = np.array([0, 1, 2, 1], dtype=np.int64)
w = lambda n, fr: open(d + "/" + n, "wb").write(b"".join(fr))
w("ok.tq", [ts.array_frame("emb", x), ts.array_frame("y", y)])
xn = x.copy(); xn[2, 1] = np.nan
w("nan.tq", [ts.array_frame("emb", xn), ts.array_frame("y", y)])
xi = x.copy(); xi[3, 0] = np.inf
w("inf.tq", [ts.array_frame("emb", xi), ts.array_frame("y", y)])
yf = y.astype(np.float32) / 2; yf[1] = np.inf
w("ynan.tq", [ts.array_frame("emb", x), ts.array_frame("y", yf)])
wt = np.ones(4, np.float32); wt[0] = np.nan
w("wnan.tq", [ts.array_frame("emb", x), ts.array_frame("y", y), ts.array_frame("w", wt)])
x64 = x.astype(np.float64); x64[1, 2] = 1e300
w("big64.tq", [ts.array_frame("emb", x64), ts.array_frame("y", y)])
w("short.tq", [ts.array_frame("emb", x), ts.array_frame("y", y[:3])])
w("neg.tq", [ts.array_frame("emb", x), ts.array_frame("y", np.array([0, -1, 2, 1], dtype=np.int64))])
w("two.tq", [ts.array_frame("a", x), ts.array_frame("b", x), ts.array_frame("y", y)])
w("groups.tq", [ts.array_frame("emb", x), ts.array_frame("y", y.astype(np.float32) / 2),
                ts.array_frame("group", np.array([1, 2, 1, 1], dtype=np.int64))])
PYEOF
    bad "$D/nan.tq" 65 'row 2 of "emb": feature 1 is NaN' --model softmax
    bad "$D/inf.tq" 65 'row 3 of "emb": feature 0 is infinite' --model softmax
    # tq-train.1 (NaN and infinities): targets and weights too; an f64 feature
    # beyond f32's range is infinite once converted
    bad "$D/ynan.tq" 65 'row 1 of "y": the target is not finite' --model linear
    bad "$D/wnan.tq" 65 'row 0 of "w": weight nan is not a finite number >= 0' --model softmax --weight w
    bad "$D/big64.tq" 65 'row 1 of "emb": feature 2 is infinite' --model softmax
    bad "$D/ok.tq" 65 'nan.tq: row 2 of "emb": feature 1 is NaN' --model softmax --valid "$D/nan.tq"
    bad "$D/short.tq" 65 '4 rows of features "emb" but 3 of "y"' --model softmax
    bad "$D/neg.tq" 65 'row 1: label -1 is not a class 0..2' --model softmax
    bad "$D/ok.tq" 65 'row 2: label 2 is not a class 0..1' --model softmax --classes 2
    bad "$D/ok.tq" 65 'row 2: the target 2 is not within 0..1' --model logistic
    bad "$D/two.tq" 65 'which frame holds the features? "a", "b"' --model softmax
    bad "$D/groups.tq" 65 'group 1 of "group" comes back after other groups' --model linear
    bad "$D/ok.tq" 2 'a softmax model does not train with the mse loss' --model softmax --loss mse
    bad "$D/ok.tq" 2 '--patience needs a validation set' --model softmax --patience 3
    bad "$D/ok.tq" 2 'the listwise loss needs groups' --model linear --loss listwise
    bad "$D/ok.tq" 2 "--model wants one of linear, logistic, softmax, mlp, not 'svm'" --model svm
    bad "$D/ok.tq" 2 "--weight-decay is adamw's" --weight-decay 0.1
    bad "$D/none.tq" 66 'none.tq' --model softmax
}

@test "checkpoints: killed (SIGKILL) at several points, also while writing one, and resumed: the same model bytes" {
    py "$REF" data "$D" softmax --n 2000
    opts=(--model mlp --hidden 48 --epochs 5 --batch 16 --valid "$D/in.tq" --patience 9)
    tq-train "${opts[@]}" -o "$D/ref.tq" "$D/in.tq"
    # inside the write of checkpoint N (TQ_TRAIN_TEST_CRASH, half the frames
    # written), then resumed from the checkpoint before
    for n in 1 4 23; do
        rm -f "$D/ck.tq"
        run env TQ_TRAIN_TEST_CRASH=$n tq-train "${opts[@]}" --checkpoint "$D/ck.tq" \
            --checkpoint-every 5 -o "$D/m.tq" "$D/in.tq"
        [ "$status" -eq 137 ]
        resume=()
        [ -e "$D/ck.tq" ] && resume=(--resume "$D/ck.tq")
        tq-train "${opts[@]}" --checkpoint "$D/ck.tq" --checkpoint-every 5 "${resume[@]}" \
            -o "$D/m.tq" "$D/in.tq"
        cmp "$D/m.tq" "$D/ref.tq"
    done
    # at random moments, three times in one run, each time resuming
    rm -f "$D/ck.tq" "$D/m.tq"
    for i in 1 2 3; do
        resume=()
        [ -e "$D/ck.tq" ] && resume=(--resume "$D/ck.tq")
        tq-train "${opts[@]}" --checkpoint "$D/ck.tq" --checkpoint-every 3 "${resume[@]}" \
            -o "$D/m.tq" "$D/in.tq" &
        pid=$!
        sleep "0.$((RANDOM % 30 + 5))"
        kill -9 $pid 2>/dev/null || true
        wait $pid || true
    done
    resume=()
    [ -e "$D/ck.tq" ] && resume=(--resume "$D/ck.tq")
    tq-train "${opts[@]}" --checkpoint "$D/ck.tq" "${resume[@]}" -o "$D/m.tq" "$D/in.tq"
    cmp "$D/m.tq" "$D/ref.tq"
}

@test "a checkpoint of other options or data is refused, saying which" {
    py "$REF" data "$D" softmax
    tq-train --model softmax --epochs 2 --checkpoint "$D/ck.tq" -o "$D/m.tq" "$D/in.tq"
    bad "$D/in.tq" 65 'a checkpoint of other options: --lr 0.001 there, 0.01 here' \
        --model softmax --epochs 2 --lr 0.01 --resume "$D/ck.tq"
    bad "$D/in.tq" 65 'a checkpoint of other options: --model softmax there, mlp here' \
        --model mlp --epochs 2 --resume "$D/ck.tq"
    py "$REF" data "$D" softmax --n 80
    bad "$D/in.tq" 65 'a checkpoint of other training data (40 x 6' \
        --model softmax --epochs 2 --resume "$D/ck.tq"
    bad "$D/in.tq" 65 'not a tq-train checkpoint' --model softmax --resume "$D/m.tq"
}

@test "-v table, --log (a TQ stream) and --plot (a well-formed SVG holding the series)" {
    py "$REF" data "$D" softmax --n 200
    run --separate-stderr tq-train -v --model mlp --hidden 16 --epochs 4 --batch 32 \
        --valid "$D/in.tq" --log "$D/log.tq" --plot "$D/curve.svg" -o "$D/m.tq" "$D/in.tq"
    [ "$status" -eq 0 ]
    echo "$stderr"
    grep -q 'epoch .*step .*examples .*train loss .*valid loss .*accuracy .*lr .*seconds' <<<"$stderr"
    [ "$(grep -cE '^tq-train: +[0-9]+ +[0-9]+ ' <<<"$stderr")" -eq 4 ]
    py - "$D" <<'PYEOF'
import sys, numpy as np, tqstream as ts
import xml.etree.ElementTree as ET
d = sys.argv[1]
log = {f["name"]: ts.to_numpy(f) for f in ts.read(open(d + "/log.tq", "rb").read())}
assert list(log["epoch"]) == [1, 2, 3, 4], log["epoch"]
assert list(log["step"]) == [7, 14, 21, 28], log["step"]        # 200 rows, batches of 32
assert list(log["batch_step"]) == list(range(1, 29))
# each epoch's train loss is the mean of its batch losses
bl = log["batch_loss"].reshape(4, 7).mean(axis=1)
assert np.allclose(bl, log["train_loss"], rtol=1e-12), (bl, log["train_loss"])
# the last epoch's accuracy is the saved (last) model's, by a float64 forward
f = {x["name"]: ts.to_numpy(x) for x in ts.read(open(d + "/in.tq", "rb").read())}
m = {x["name"]: ts.to_numpy(x) for x in ts.read(open(d + "/m.tq", "rb").read())}
h = np.maximum(f["emb"] @ m["w1"].astype(float) + m["b1"], 0) @ m["w2"].astype(float) + m["b2"]
acc = (h.argmax(axis=1) == f["y"]).mean()
assert abs(acc - log["metric"][-1]) < 1e-12, (acc, log["metric"])
svg = ET.parse(d + "/curve.svg").getroot()
ns = "{http://www.w3.org/2000/svg}"
assert svg.tag == ns + "svg"
assert "tq-train" in svg.find(ns + "title").text
texts = [t.text or "" for t in svg.iter(ns + "text")]
assert any(t.startswith("step") for t in texts) and any(t.startswith("loss (") for t in texts), texts
for name in ("train loss (steps)", "train loss (epoch mean)", "validation loss"):
    assert name in texts, name
g = {e.get("id"): e for e in svg.iter(ns + "g")}
pts = lambda s: [tuple(map(float, p.split(","))) for p in g[s].find(ns + "polyline").get("points").split()]
assert len(pts("train-batch")) == 28 and len(pts("valid")) == 4
# higher loss is higher on the page (smaller y), in the log's order
vy = [y for _, y in pts("valid")]
assert np.argsort(vy).tolist() == np.argsort(-log["valid_loss"]).tolist(), (vy, log["valid_loss"])
PYEOF
}

@test "--precision bf16 and f16: digits accuracy within 0.02 of f32; f16 loss scaling; bytes the same whatever --threads, and after a resume" {
    needs_sklearn
    for p in f32 bf16 f16; do
        tq-train --precision $p --model mlp --hidden 64 --standardize --epochs 15 --batch 64 -o "$D/$p.tq" "$D/train.tq"

    done
    f32=$("$VENV_PY" "$REF" accuracy "$D/f32.tq" "$D" | awk '{ print $2 }')
    for p in bf16 f16; do
        a=$("$VENV_PY" "$REF" accuracy "$D/$p.tq" "$D" | awk '{ print $2 }')
        echo "$p $a, f32 $f32"
        awk -v a="$a" -v b="$f32" 'BEGIN { exit !(a >= b - 0.02 && a >= 0.95) }'
        run cmp -s "$D/$p.tq" "$D/f32.tq"
        [ "$status" -ne 0 ]
    done
    # targets of 1e4: the scaled output gradients (2 (z - y) 2^16 / 40) pass
    # f16's 65504: the first steps overflow, are skipped, and the scale halves
    py "$REF" data "$D" mse
    py - "$D/in.tq" <<'PYEOF'
import sys, numpy as np, tqstream as ts
f = {x["name"]: ts.to_numpy(x) for x in ts.read(open(sys.argv[1], "rb").read())}
open(sys.argv[1], "wb").write(ts.array_frame("emb", f["emb"]) + ts.array_frame("y", f["y"] * 1e4))
PYEOF
    run --separate-stderr tq-train -v --precision f16 --model linear --epochs 3 --batch 8 --lr 0.1 \
        -o "$D/m.tq" "$D/in.tq"
    [ "$status" -eq 0 ]
    echo "$stderr"
    grep -qE 'f16 loss scale [0-9.]+ at the end, [1-9][0-9]* steps? skipped' <<<"$stderr"
    [ "$(grep -c 'loss scale 65536 ' <<<"$stderr")" -eq 0 ]
    for t in 1 3; do
        tq-train --threads $t --precision bf16 --model mlp --hidden 16 --epochs 2 --batch 8 \
            -o "$D/b$t.tq" "$D/in.tq"
    done
    cmp "$D/b1.tq" "$D/b3.tq"
    opts=(--precision f16 --model linear --epochs 3 --batch 8 --lr 0.1)
    run env TQ_TRAIN_TEST_CRASH=4 tq-train "${opts[@]}" --checkpoint "$D/ck.tq" --checkpoint-every 2 \
        -o "$D/r.tq" "$D/in.tq"
    [ "$status" -eq 137 ]
    tq-train "${opts[@]}" --checkpoint "$D/ck.tq" --resume "$D/ck.tq" -o "$D/r.tq" "$D/in.tq"
    cmp "$D/r.tq" "$D/m.tq"
}

@test "MPI: mpirun -np 1, 2 and 4 give the same model bytes; rank 0 alone writes and reports; one error message" {
    command -v mpirun >/dev/null || skip "Open MPI is not installed (openmpi-bin)"
    needs_mpi_train
    open_mpi_env
    py "$REF" data "$D" softmax --n 200
    for np in 1 2 4; do
        mkdir "$D/np$np"
        (cd "$D/np$np" && mpirun -np $np --oversubscribe tq-train -v --model mlp --hidden 16 \
            --epochs 2 --batch 50 --valid ../in.tq --checkpoint ck.tq -o m.tq ../in.tq 2> err)
        cat "$D/np$np/err"
        [ "$(grep -c "MPI: $np ranks\?, each batch in chunks of 16 examples" "$D/np$np/err")" -eq 1 ]
        [ "$(grep -c 'trained in' "$D/np$np/err")" -eq 1 ]
        [ -z "$(ls -A "$D/np$np" | grep tmp)" ]
    done
    cmp "$D/np1/m.tq" "$D/np2/m.tq"
    cmp "$D/np1/m.tq" "$D/np4/m.tq"
    cmp "$D/np1/ck.tq" "$D/np4/ck.tq"
    run --separate-stderr mpirun -np 2 --oversubscribe tq-train --model softmax --classes 2 \
        -o "$D/x.tq" "$D/in.tq"
    [ "$status" -ne 0 ]
    [ "$(grep -c '^tq-train: error:' <<<"$stderr")" -eq 1 ]
    grep -q 'label 2 is not a class 0..1' <<<"$stderr"
    [ ! -e "$D/x.tq" ]
}

@test "MPI: libmpi is loaded only under a launcher: not linked; a launcher's environment without it is one error, exit 1" {
    needs_mpi_train
    [ -z "$(ldd "$TQ_BIN/tq-train" | grep libmpi)" ]
    py "$REF" data "$D" softmax
    # outside a launcher no MPI library is opened, not even a missing one
    TQ_MPI_LIB="$D/none/libmpi.so.40" tq-train --model softmax -o "$D/m.tq" "$D/in.tq"
    for var in OMPI_COMM_WORLD_SIZE PMIX_RANK PMI_RANK; do
        run --separate-stderr env "$var=1" TQ_MPI_LIB="$D/none/libmpi.so.40" tq-train --model softmax \
            -o "$D/x.tq" "$D/in.tq"
        echo "$stderr"
        [ "$status" -eq 1 ] && [ "${#stderr_lines[@]}" -eq 1 ]
        [[ "$stderr" == "tq-train: error: MPI: started by a launcher, but $D/none/libmpi.so.40: cannot open shared object file"* ]]
        [ ! -e "$D/x.tq" ]
    done
    # a library that is not Open MPI's says so
    run --separate-stderr env OMPI_COMM_WORLD_SIZE=1 TQ_MPI_LIB=libm.so.6 tq-train --model softmax \
        -o "$D/x.tq" "$D/in.tq"
    [ "$status" -eq 1 ]
    [ "$stderr" = "tq-train: error: MPI: libm.so.6 has no MPI_Init (not Open MPI's libmpi?)" ]
}

@test "--valid: frames of one name on both sides each come from their own input; widths must agree; -v says what came from where" {
    py - "$D" <<'PYEOF'
import sys, numpy as np, tqstream as ts
D = sys.argv[1]
rng = np.random.default_rng(11)
def data(n, d):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
def w(name, frames):
    open(D + "/" + name, "wb").write(b"".join(frames))
xt, yt = data(64, 8)
xv, yv = data(32, 8)
noise = rng.standard_normal((32, 8)).astype(np.float32)
w("tr.tq", [ts.array_frame("emb", xt), ts.array_frame("y", yt)])
w("va.tq", [ts.array_frame("emb", xv), ts.array_frame("y", yv)])
w("va_f.tq", [ts.array_frame("f", xv), ts.array_frame("y", yv)])
# features named f on both sides, and the validation file holds an "emb" too
w("trf.tq", [ts.array_frame("f", xt), ts.array_frame("y", yt)])
w("vaf.tq", [ts.array_frame("emb", noise), ts.array_frame("f", xv), ts.array_frame("y", yv)])
x384, y384 = data(32, 384)
w("va384.tq", [ts.array_frame("emb", x384), ts.array_frame("y", y384)])
PYEOF
    opts=(--model logistic --epochs 3 --batch 16 --lr 0.05)
    # "emb" in the training input (standard input) and in --valid FILE
    run --separate-stderr sh -c "tq-train -v ${opts[*]} --valid '$D/va.tq' < '$D/tr.tq' > '$D/a.tq'"
    assert_success
    [[ "$stderr" == *"tq-train: training features: frame \"emb\" [64 x 8] from standard input; validation features: frame \"emb\" [32 x 8] from $D/va.tq"* ]]
    table_a=$(grep -E '^tq-train: +[0-9]+ ' <<<"$stderr" | awk '{print $2, $5, $6}')
    # the reference: the same rows under names that cannot mix
    run --separate-stderr sh -c "tq-train -v ${opts[*]} --valid '$D/va_f.tq' < '$D/tr.tq' > '$D/b.tq'"
    assert_success
    table_b=$(grep -E '^tq-train: +[0-9]+ ' <<<"$stderr" | awk '{print $2, $5, $6}')
    [ -n "$table_a" ] && [ "$table_a" = "$table_b" ]
    cmp "$D/a.tq" "$D/b.tq"
    # features "f" (the only rank 2 float frame) in training: the validation
    # set takes its "f" too, not the "emb" beside it
    run --separate-stderr sh -c "tq-train -v ${opts[*]} --valid '$D/vaf.tq' < '$D/trf.tq' > '$D/c.tq'"
    assert_success
    [[ "$stderr" == *"validation features: frame \"f\" [32 x 8] from $D/vaf.tq"* ]]
    table_c=$(grep -E '^tq-train: +[0-9]+ ' <<<"$stderr" | awk '{print $2, $5, $6}')
    [ "$table_c" = "$table_b" ]
    # 384 values a row against 8: one line naming both, exit 65, no model
    run --separate-stderr sh -c "tq-train ${opts[*]} --valid '$D/va384.tq' -o '$D/bad.tq' < '$D/tr.tq'"
    [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [ "$stderr" = "tq-train: error: validation features and training features differ in width: \"emb\" from $D/va384.tq has 384 values a row, \"emb\" from standard input has 8" ]
    [ ! -e "$D/bad.tq" ]
}

# ---- issue 38: the convex models solved by L-BFGS by default ----

# classes N: DIR/in.tq, N rows of 12 features, 4 classes from a noisy linear
# rule (a problem L-BFGS takes a dozen iterations or more over)
classes() {
    py - "$D/in.tq" "$1" <<'PYEOF'
import sys, numpy as np, tqstream as ts
r = np.random.default_rng(7)
n = int(sys.argv[2])
x = r.standard_normal((n, 12)) * np.linspace(0.5, 4, 12) + 1
y = (x @ r.standard_normal((12, 4)) + 2 * r.standard_normal((n, 4))).argmax(axis=1)
open(sys.argv[1], "wb").write(ts.array_frame("emb", x.astype(np.float32)) + ts.array_frame("y", y.astype(np.int64)))
PYEOF
}

# bats test_tags=san:sample
@test "lbfgs defaults against scikit-learn's defaults on its bundled data: accuracy (R^2) within 0.01, weights within 1e-3 of their norm" {
    needs_sklearn
    # scikit-learn: LogisticRegression() (lbfgs, C = 1, tol 1e-4, max_iter 100)
    # and LinearRegression() for diabetes, on StandardScaler'd inputs; tq-train:
    # its defaults and --standardize (the same population scale). Both stop at
    # max |gradient| <= 1e-4 of one objective: measured, the weights differ by
    # 5e-5 of their norm at most (digits), 2e-8..8e-7 elsewhere; 1e-3 leaves
    # 20x room, and a penalty 10% off (--C 1.1, below) is 5e-3 away or more.
    for n in breast_cancer iris wine digits diabetes; do
        "$VENV_PY" "$REF" skdata "$D" $n
        case $n in diabetes) m=linear ;; breast_cancer) m=logistic ;; *) m=softmax ;; esac
        run --separate-stderr tq-train --model $m --standardize -o "$D/m.tq" "$D/train.tq"
        [ "$status" -eq 0 ] && [ -z "$stderr" ] || { echo "$n: $stderr"; return 1; }
        run "$VENV_PY" "$REF" skcheck "$D/m.tq" "$D" $n --coef 1e-3
        echo "$output"
        [ "$status" -eq 0 ]
    done
    # the check can fail: C = 1.1 (a penalty 10% weaker), or a tol 100x looser
    "$VENV_PY" "$REF" skdata "$D" digits
    tq-train --model softmax --standardize --C 1.1 -o "$D/m.tq" "$D/train.tq"
    run "$VENV_PY" "$REF" skcheck "$D/m.tq" "$D" digits --coef 1e-3
    echo "$output"
    [ "$status" -ne 0 ] && [[ "$output" == *"differ from scikit-learn's by"* ]]
    tq-train --model softmax --standardize --tol 1e-2 -o "$D/m.tq" "$D/train.tq"
    run "$VENV_PY" "$REF" skcheck "$D/m.tq" "$D" digits --coef 1e-3
    [ "$status" -ne 0 ]
    # the old defaults (Adam, 10 epochs) fell short of scikit-learn: what the issue saw
    "$VENV_PY" "$REF" skdata "$D" breast_cancer
    tq-train --model logistic --standardize --optimizer adam -o "$D/m.tq" "$D/train.tq"
    run "$VENV_PY" "$REF" skcheck "$D/m.tq" "$D" breast_cancer
    echo "$output"
    [ "$status" -ne 0 ]
}

@test "lbfgs: the same model bytes whatever --threads, and killed (SIGKILL) while checkpointing then resumed" {
    # 2000 rows: 8 chunks of 256 in the sums; 500 groups for listwise: 2
    classes 2000
    for t in 1 2 3; do
        tq-train --threads $t --model softmax --standardize -o "$D/t$t.tq" "$D/in.tq"
    done
    cmp "$D/t1.tq" "$D/t2.tq"
    cmp "$D/t1.tq" "$D/t3.tq"
    py "$REF" data "$D" listwise --n 2000
    tq-train --threads 1 --model linear --loss listwise -o "$D/l1.tq" "$D/in.tq"
    tq-train --threads 2 --model linear --loss listwise -o "$D/l2.tq" "$D/in.tq"
    cmp "$D/l1.tq" "$D/l2.tq"
    classes 2000
    run --separate-stderr tq-train -v --model softmax -o "$D/ref.tq" "$D/in.tq"
    iters=$(sed -n 's/.*L-BFGS converged in \([0-9]*\) iterations.*/\1/p' <<<"$stderr")
    echo "$iters iterations"
    [ "$iters" -ge 6 ]
    # a checkpoint each iteration (the memory of pairs in it); killed midway
    # through writing checkpoint N, resumed from the one before
    for n in 1 3 $((iters - 1)) $iters; do
        rm -f "$D/ck.tq"
        run env TQ_TRAIN_TEST_CRASH=$n tq-train --model softmax --checkpoint "$D/ck.tq" \
            -o "$D/m.tq" "$D/in.tq"
        [ "$status" -eq 137 ]
        resume=()
        [ -e "$D/ck.tq" ] && resume=(--resume "$D/ck.tq")
        tq-train --model softmax --checkpoint "$D/ck.tq" "${resume[@]}" -o "$D/m.tq" "$D/in.tq"
        cmp "$D/m.tq" "$D/ref.tq"
    done
    # a checkpoint of another tol is refused, saying which
    bad "$D/in.tq" 65 'a checkpoint of other options: --tol 0.0001 there, 0.001 here' \
        --model softmax --tol 1e-3 --resume "$D/ck.tq"
}

@test "lbfgs under mpirun -np 1, 2 and 3: the same model bytes as without MPI" {
    command -v mpirun >/dev/null || skip "Open MPI is not installed (openmpi-bin)"
    needs_mpi_train
    open_mpi_env
    classes 2000
    tq-train --model softmax --standardize -o "$D/plain.tq" "$D/in.tq"
    for np in 1 2 3; do
        mpirun -np $np --oversubscribe tq-train -v --model softmax --standardize \
            -o "$D/np$np.tq" "$D/in.tq" 2> "$D/err$np"
        cmp "$D/plain.tq" "$D/np$np.tq"
        # -v names L-BFGS's chunks (tq-train(1): 256 rows), not a batch's
        [ "$(grep -c "MPI: $np ranks\?, the data's sums in chunks of 256 rows" "$D/err$np")" -eq 1 ]
    done
}

@test "lbfgs says how it ended: one warning at --max-iter, none when converged; -v a line each iteration" {
    classes 400
    run --separate-stderr tq-train --model softmax --max-iter 3 -o "$D/m.tq" "$D/in.tq"
    [ "$status" -eq 0 ] && [ -s "$D/m.tq" ]
    echo "$stderr"
    [ "${#stderr_lines[@]}" -eq 1 ]
    [[ "$stderr" =~ ^"tq-train: warning: L-BFGS did not converge in 3 iterations (gradient "[0-9.]+(e-[0-9]+)?" > tol 1e-4); raise --max-iter"$ ]]
    run --separate-stderr tq-train -q --model softmax --max-iter 3 -o "$D/m.tq" "$D/in.tq"
    [ "$status" -eq 0 ] && [ -z "$stderr" ]
    run --separate-stderr tq-train --model softmax -o "$D/m.tq" "$D/in.tq"
    [ "$status" -eq 0 ] && [ -z "$stderr" ]
    run --separate-stderr tq-train -v --model softmax -o "$D/m.tq" "$D/in.tq"
    echo "$stderr"
    grep -q 'iter .*f-evals .*objective .*gradient .*step .*seconds' <<<"$stderr"
    iters=$(sed -n 's/.*L-BFGS converged in \([0-9]*\) iterations (gradient .* <= tol 1e-4).*/\1/p' <<<"$stderr")
    [ -n "$iters" ]
    [ "$(grep -cE '^tq-train: +[0-9]+ +[0-9]+ +[0-9.e+-]+ +[0-9.e+-]+ ' <<<"$stderr")" -eq "$iters" ]
    [ "$(grep -c warning <<<"$stderr")" -eq 0 ]
}

@test "lbfgs: options of the stochastic optimizers keep them; mixing the two is a usage error" {
    py "$REF" data "$D" softmax
    run --separate-stderr tq-train -v --model softmax -o "$D/m.tq" "$D/in.tq"
    [[ "$stderr" == *"softmax loss, lbfgs;"* ]]
    run --separate-stderr tq-train -v --model softmax --epochs 3 -o "$D/m.tq" "$D/in.tq"
    [[ "$stderr" == *"softmax loss, adam;"* ]]
    run --separate-stderr tq-train -v --model mlp -o "$D/m.tq" "$D/in.tq"
    [[ "$stderr" == *"softmax loss, adam;"* ]]
    bad "$D/in.tq" 2 '--lr is for sgd, adam and adamw; lbfgs runs to convergence' \
        --model softmax --optimizer lbfgs --lr 0.1
    bad "$D/in.tq" 2 '--max-iter is lbfgs' --model softmax --optimizer adam --max-iter 5
    bad "$D/in.tq" 2 '--max-iter is lbfgs' --model mlp --max-iter 5
    bad "$D/in.tq" 2 '--optimizer lbfgs solves the convex models' --model mlp --optimizer lbfgs
    bad "$D/in.tq" 2 '--C and --l2 set one penalty' --model softmax --C 2 --l2 0.1
}

# ---- issue 38: an MLP's defaults are scikit-learn's MLPClassifier's ----

# bats test_tags=san:sample
@test "MLP defaults (a hidden layer of 100, Adam, batches of min(200, n), up to 200 epochs, 10 without progress, alpha 1e-4): MLPClassifier's test accuracy within 0.01" {
    needs_sklearn
    for n in digits iris wine breast_cancer; do
        "$VENV_PY" "$REF" skdata "$D" $n
        loss=()
        [ $n = breast_cancer ] && loss=(--loss logistic) # its 0/1 targets are floats here
        tq-train --model mlp "${loss[@]}" --standardize -o "$D/m.tq" "$D/train.tq"
        # against MLPClassifier() with its defaults (a hidden layer of 100,
        # alpha 1e-4: tq-train's defaults), the median test accuracy of
        # random_state 0, 1, 2 (one seed alone swings by 0.04 on iris)
        run "$VENV_PY" - "$D/m.tq" $n <<'PYEOF'
import sys, warnings, numpy as np
sys.path.insert(0, sys.path[0] or ".")
import train_ref as tr
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler
warnings.simplefilter("ignore")
reg, xtr, xte, ytr, yte = tr.sk_split(sys.argv[2])
_, _, z = tr.logits(sys.argv[1], xte)
a = float(((z.argmax(1) if z.shape[1] > 1 else z[:, 0] > 0) == yte).mean())
s = StandardScaler().fit(xtr)
sk = sorted(MLPClassifier(random_state=r).fit(s.transform(xtr), ytr)
            .score(s.transform(xte), yte) for r in range(3))
print("%s: tq-train %.4f, MLPClassifier %s" % (sys.argv[2], a, sk))
sys.exit(0 if a >= sk[1] - 0.01 else 1)
PYEOF
        echo "$output"
        [ "$status" -eq 0 ]
    done
}

@test "MLP stopping rule: N epochs without the training loss falling by --tol end the run; with --valid, the metric, and the best epoch's model kept" {
    classes 600
    run --separate-stderr tq-train -v --model mlp --hidden 16 --tol 0.01 --log "$D/log.tq" \
        -o "$D/m.tq" "$D/in.tq"
    [ "$status" -eq 0 ]
    echo "$stderr"
    grep -q 'batches of 200, up to 200 epochs, stopping after 10 without the training loss improving by 0.01' <<<"$stderr"
    grep -q 'stopped early: the training loss did not improve by 0.01 for 10 epochs' <<<"$stderr"
    # the rule replayed on the logged losses stops at the epoch the run did
    py - "$D/log.tq" 0.01 10 <<'PYEOF'
import sys, numpy as np, tqstream as ts
log = {f["name"]: ts.to_numpy(f) for f in ts.read(open(sys.argv[1], "rb").read())}
tol, k = float(sys.argv[2]), int(sys.argv[3])
best, bad, stop = np.inf, 0, None
for e, l in enumerate(log["train_loss"], 1):
    bad = bad + 1 if l > best - tol else 0
    best = min(best, l)
    if bad >= k:
        stop = e
        break
assert stop == len(log["epoch"]) and stop < 200, (stop, len(log["epoch"]))
assert list(log["step"][:2]) == [3, 6], log["step"]  # 600 rows in batches of 200
PYEOF
    # with --valid: the metric decides, and the model is the best epoch's
    run --separate-stderr tq-train -v --model mlp --hidden 16 --tol 0.01 --valid "$D/in.tq" \
        --log "$D/log.tq" -o "$D/m.tq" "$D/in.tq"
    [ "$status" -eq 0 ]
    grep -q "stopped early: the accuracy did not improve by 0.01 for 10 epochs; the best epoch's model kept" <<<"$stderr"
    py - "$D/log.tq" "$D/in.tq" "$D/m.tq" <<'PYEOF'
import sys, numpy as np, tqstream as ts
rd = lambda p: {f["name"]: ts.to_numpy(f) for f in ts.read(open(p, "rb").read())}
log, f, m = rd(sys.argv[1]), rd(sys.argv[2]), rd(sys.argv[3])
h = np.maximum(f["emb"] @ m["w1"].astype(float) + m["b1"], 0) @ m["w2"].astype(float) + m["b2"]
acc = (h.argmax(axis=1) == f["y"]).mean()
assert abs(acc - log["metric"].max()) < 1e-12, (acc, log["metric"])
assert log["metric"][-1] < log["metric"].max() or len(log["epoch"]) < 200
PYEOF
    # options given still rule: --epochs 3 runs 3, --n-iter-no-change 0 never stops early
    run --separate-stderr tq-train -v --model mlp --hidden 16 --epochs 3 -o "$D/m.tq" "$D/in.tq"
    [ "$(grep -cE '^tq-train: +[0-9]+ +[0-9]+ ' <<<"$stderr")" -eq 3 ]
    run --separate-stderr tq-train -v --model mlp --hidden 16 --epochs 80 --tol 0.01 -o "$D/m.tq" "$D/in.tq"
    [ "$(grep -cE '^tq-train: +[0-9]+ +[0-9]+ ' <<<"$stderr")" -lt 80 ]
    run --separate-stderr tq-train -v --model mlp --hidden 16 --epochs 80 --n-iter-no-change 0 \
        -o "$D/m.tq" "$D/in.tq"
    [ "$(grep -cE '^tq-train: +[0-9]+ +[0-9]+ ' <<<"$stderr")" -eq 80 ]
    bad "$D/in.tq" 2 '--tol is lbfgs' --model mlp --n-iter-no-change 0 --tol 0.01
    bad "$D/in.tq" 2 '--tol is lbfgs' --model softmax --optimizer adam --tol 0.01
}
