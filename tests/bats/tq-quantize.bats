#!/usr/bin/env bats
# tq-quantize: every code byte for byte against tests/lib/quantref.py (an
# independent NumPy implementation of the ggml and sentence-transformers
# definitions, itself checked against gguf and sentence-transformers where
# installed), the error bounds of man/tq-quantize.1 on the way back, the -v and
# --report figures against NumPy, determinism, and every bad input.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    # 300 rows of 64 in batches of 70 (the last one short), with key and note
    # frames to pass through; typical embedding magnitudes, then tiny and large
    py "$TESTS_DIR/lib/quantref.py" make x.tq 1 300 64 70 0.05
}

QR() { py "$TESTS_DIR/lib/quantref.py" "$@"; }
# code_of CODE: standard input in CODE (int8r: int8 over the input's ranges)
code_of() {
    case $1 in
    uint8) tq-quantize --to uint8 --ranges auto "$BATS_TEST_TMPDIR/x.tq" ;;
    int8r) tq-quantize --to int8 --ranges auto "$BATS_TEST_TMPDIR/x.tq" ;;
    *) tq-quantize --to "$1" ;;
    esac
}

@test "every code: the reference's bytes, batch by batch, other frames passed through" {
    py "$TESTS_DIR/lib/quantref.py" make tiny.tq 2 100 64 33 1e-6
    py "$TESTS_DIR/lib/quantref.py" make big.tq 3 100 64 100 3000
    for c in f16 bf16 int8 q8_0 q4_0 q2 bit; do
        for in in x tiny big; do
            tq-quantize --to "$c" < "$in.tq" > out.tq
            QR check "$c" "$in.tq" out.tq
        done
    done
}

@test "--to f32: every code decodes to the values of its definition (NumPy), byte for byte" {
    # quantref.py decode: ggml's dequantize_row_q8_0/_q4_0, q x scale, the
    # ranges' min + q step (float64, then float32), +1/-1, the f16/bf16 widening
    for c in f16 bf16 int8 uint8 int8r q8_0 q4_0 q2 bit; do
        code_of "$c" < x.tq > c.tq
        QR decode c.tq want.tq
        tq-quantize --to f32 < c.tq > got.tq
        cmp got.tq want.tq
    done
}

@test "dequantized values stay within the bounds the man page states" {
    for c in f16 bf16 int8 q8_0 q4_0 q2 bit; do
        tq-quantize --to "$c" < x.tq | tq-quantize --to f32 > back.tq
        QR bounds "$c" x.tq back.tq
        # frames other than the codes come back as they were
        run tq-cat --info < back.tq
        [[ "$output" != *emb_scale* ]]
    done
    tq-quantize --to f16 < x.tq > h.tq
    tq-quantize --to f32 < h.tq | tq-quantize --to f16 | cmp - h.tq
}

@test "uint8 and int8 over ranges: sentence-transformers' codes from a file, auto and read back" {
    py "$TESTS_DIR/lib/quantref.py" make calib.tq 9 120 64 50 0.05
    tq-quantize --to uint8 --ranges calib.tq < x.tq > u.tq
    QR check uint8 x.tq u.tq calib.tq
    tq-quantize --to int8 --ranges calib.tq < x.tq > i.tq
    QR check int8r x.tq i.tq calib.tq
    tq-quantize --to uint8 --ranges auto x.tq > a.tq
    QR check uint8 x.tq a.tq
    # auto from standard input that is a file; ranges read back from an output
    tq-quantize --to int8 --ranges auto < x.tq > b.tq
    QR check int8r x.tq b.tq
    tq-quantize --to uint8 --ranges u.tq < x.tq | cmp - u.tq
    tq-quantize --to f32 < u.tq > back.tq
    QR bounds uint8 x.tq back.tq calib.tq
    tq-quantize --to f32 < i.tq > back.tq
    QR bounds int8r x.tq back.tq calib.tq
}

@test "the reference agrees with gguf.quants and sentence-transformers (where installed)" {
    PYR=""
    for p in "$ROOT_DIR/.venv/bin/python" /usr/bin/python3; do
        "$p" -c 'import gguf' 2>/dev/null && { PYR=$p; break; }
    done
    [ -n "$PYR" ] || skip "gguf is not installed (scripts/requirements-test.txt puts it in .venv)"
    run "$PYR" "$TESTS_DIR/lib/quantref.py" peers
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"ok gguf"* ]]
}

@test "same bytes whatever the threads and the batches" {
    py "$TESTS_DIR/lib/quantref.py" make big.tq 4 3000 64 3000 0.05
    py "$TESTS_DIR/lib/quantref.py" make small.tq 4 3000 64 250 0.05
    for c in int8 q4_0 bit; do
        tq-quantize --to "$c" --threads 1 < big.tq > a.tq
        tq-quantize --to "$c" --threads 2 < big.tq > b.tq
        cmp a.tq b.tq
        tq-quantize --to "$c" < small.tq | tq-quantize --to f32 | tq-cat --name emb -t tsv > s.tsv
        tq-quantize --to f32 < a.tq | tq-cat --name emb -t tsv > a.tsv
        diff <(grep -v '^emb' a.tsv) <(grep -v '^emb' s.tsv)
    done
}

@test "-v and --report: sizes, bits a value and errors as NumPy computes them" {
    run --separate-stderr tq-quantize --to q8_0 -v --report rep.tq -o out.tq x.tq
    [ "$status" -eq 0 ]
    [[ "$stderr" == *"emb: f32 -> q8_0, 300 x 64, 76800 -> 20400 bytes, 8.5 bits a value"* ]]
    tq-quantize --to f32 < out.tq > back.tq
    py -c '
import numpy as np, tqstream as t
x = np.concatenate([t.to_numpy(f) for f in t.read(open("x.tq","rb").read()) if f["name"] == "emb"]).astype(np.float64)
y = np.concatenate([t.to_numpy(f) for f in t.read(open("back.tq","rb").read()) if f["name"] == "emb"]).astype(np.float64)
r = {f["name"]: t.to_numpy(f) for f in t.read(open("rep.tq","rb").read())}
assert r["name"] == ["emb"] and r["from"] == ["f32"] and r["to"] == ["q8_0"], r
assert r["rows"][0] == 300 and r["dim"][0] == 64
assert r["bytes_in"][0] == 300 * 64 * 4 and r["bytes_out"][0] == 300 * 2 * 34
e = y - x
cos = (x * y).sum(1) / np.sqrt((x * x).sum(1) * (y * y).sum(1))
cos[1] = 1.0  # the zero row: both zero, they agree
want = dict(bits_per_value=8.5, rmse=np.sqrt((e * e).mean()),
            rel_rmse=np.sqrt((e * e).sum() / (x * x).sum()), cos_mean=cos.mean(),
            cos_min=cos.min(), max_abs_err=np.abs(e).max())
# float64 sums in another order: 1e-12 relative
for k, v in want.items():
    assert abs(r[k][0] - v) <= 1e-12 * abs(v) + 1e-300, (k, r[k][0], v)'
}

@test "--name picks the frames; a name the stream lacks is said" {
    py -c '
import numpy as np, tqstream as t
rng = np.random.default_rng(3)
a = rng.standard_normal((10, 32)).astype(np.float32); b = rng.standard_normal((5, 64)).astype(np.float32)
open("two.tq","wb").write(t.array_frame("a", a) + t.array_frame("b", b))'
    tq-quantize --to bit --name b < two.tq > out.tq
    run tq-cat --info < out.tq
    [[ "${lines[1]}" == *" a "*f32* ]] && [[ "${lines[2]}" == *" b "*bit* ]]
    tq-quantize --to bit --name a --name b < two.tq > out.tq
    run tq-cat --info < out.tq
    [[ "${lines[1]}" == *bit* ]] && [[ "${lines[2]}" == *bit* ]]
    # a name lacking beside one there: said, exit 0; nothing to quantize: 65
    run --separate-stderr tq-quantize --to bit --name b --name c -o out.tq < two.tq
    [ "$status" -eq 0 ] && [ "$stderr" = 'tq-quantize: no frame "c" in the input' ]
    run --separate-stderr tq-quantize --to bit --name c < two.tq
    [ "$status" -eq 65 ] && [ -z "$output" ]
    [ "$stderr" = 'tq-quantize: error: no frame to quantize in standard input: no frame "c" among its frames ("a", "b")' ]
}

@test "bad input: one line, the exit status of the conventions, the row named" {
    one() { [ "$status" -eq "$1" ] && [ "${#stderr_lines[@]}" -eq 1 ] &&
        [[ "$stderr" == "tq-quantize: error: "* ]] && [ -z "$output" ]; }
    run --separate-stderr tq-quantize < x.tq
    one 2
    run --separate-stderr tq-quantize --to int4 < x.tq
    one 2
    run --separate-stderr tq-quantize --to uint8 < x.tq
    one 2
    run --separate-stderr tq-quantize --to q8_0 --ranges auto < x.tq
    one 2
    run --separate-stderr tq-quantize --to bit missing.tq
    one 66
    run --separate-stderr bash -c 'cat x.tq | tq-quantize --to uint8 --ranges auto'
    one 2
    py -c '
import numpy as np, tqstream as t
rng = np.random.default_rng(3)
x = rng.standard_normal((200, 100)).astype(np.float32)
open("w100.tq","wb").write(t.array_frame("emb", x))
y = rng.standard_normal((200, 64)).astype(np.float32)
y[137, 5] = np.nan
open("nan.tq","wb").write(t.array_frame("emb", y[:100]) + t.array_frame("emb", y[100:]))
y[137, 5] = -np.inf
open("inf.tq","wb").write(t.array_frame("emb", y))
y[137, 5] = 70000
open("big.tq","wb").write(t.array_frame("emb", y))
open("r3.tq","wb").write(t.array_frame("emb", x[:, :3]))'
    for c in q8_0 q4_0 q2; do
        run --separate-stderr tq-quantize --to "$c" < w100.tq
        one 65
        [[ "$stderr" == *"multiple of 32"*"100"* ]]
    done
    # tq-quantize.1 (NaN and infinities): no code holds them, the row is
    # refused by its number (counted across batches), with every code
    for c in f16 int8 q8_0 q4_0 q2 bit bf16; do
        run --separate-stderr tq-quantize --to "$c" < nan.tq
        one 65
        [ "$stderr" = "tq-quantize: error: frame 1 \"emb\": row 137 has a NaN or an infinity; $c cannot hold it" ]
        run --separate-stderr tq-quantize --to "$c" < inf.tq
        one 65
        [ "$stderr" = "tq-quantize: error: frame 0 \"emb\": row 137 has a NaN or an infinity; $c cannot hold it" ]
    done
    for c in uint8 int8; do
        run --separate-stderr tq-quantize --to "$c" --ranges auto < nan.tq
        one 65
        [ "$stderr" = 'tq-quantize: error: --ranges auto: frame 1 "emb": calibration row 137 has a NaN or an infinity' ]
    done
    run --separate-stderr tq-quantize --to f16 < big.tq
    one 65
    [[ "$stderr" == *"row 137 "*"range of f16"* ]]
    run --separate-stderr tq-quantize --to uint8 --ranges r3.tq < x.tq
    one 65
    [[ "$stderr" == *"3 dimensions"*"64"* ]]
    # codes without what they need to come back: a scale frame, ranges
    tq-quantize --to int8 < x.tq | py -c '
import sys, tqstream as t
fr = t.read(sys.stdin.buffer.read())
sys.stdout.buffer.write(b"".join(t.frame(f["name"], f["dtype"], f["dims"], f["raw"], meta=f["meta"])
                                 for f in fr if f["name"] != "emb_scale"))' > noscale.tq
    run --separate-stderr tq-quantize --to f32 < noscale.tq
    one 65
    [[ "$stderr" == *'"emb_scale"'* ]]
}

@test "tq-cat shows the codes, tq-score and tq-attend read every code as its decoded values" {
    # tq-cat -t: int8 codes with their scale column, q4_0 decoded (NumPy here)
    tq-quantize --to int8 < x.tq | tq-cat -t tsv --name emb_scale,emb > i8.tsv
    tq-quantize --to q4_0 < x.tq | tq-cat -t tsv --name emb > q4.tsv
    py -c '
import numpy as np, tqstream as t, quantref as r
x = np.concatenate([t.to_numpy(f) for f in t.read(open("x.tq","rb").read()) if f["name"] == "emb"])
q, s = r.int8_row(x)
got = np.loadtxt("i8.tsv", skiprows=1, dtype=np.float64, delimiter="\t")
assert np.array_equal(got[:, 0].astype(np.float32), s) and np.array_equal(got[:, 1:], q)
b = np.frombuffer(r.q4_0(x).tobytes(), np.uint8).reshape(-1, 18)
d = b[:, :2].copy().view(np.float16).astype(np.float32)
v = np.concatenate([(b[:, 2:] & 15).astype(np.int32) - 8, (b[:, 2:] >> 4).astype(np.int32) - 8], axis=1)
want = (v * d).astype(np.float32).reshape(x.shape)
got = np.loadtxt("q4.tsv", skiprows=1, dtype=np.float32, delimiter="\t")
assert np.array_equal(got, want), np.abs(got - want).max()'
    # a tool fed codes computes what it computes on their values, decoded
    # here by the reference (quantref.py decode)
    for c in f16 bf16 int8 uint8 int8r q8_0 q4_0 q2 bit; do
        code_of "$c" < x.tq > c.tq
        QR decode c.tq f.tq
        tq-score --consensus < c.tq | tq-cat -t tsv --name key,score,rank > a.tsv
        tq-score --consensus < f.tq | tq-cat -t tsv --name key,score,rank > b.tsv
        diff a.tsv b.tsv
        # the reference of --query in codes too: one row, with its scale or ranges
        py -c '
import sys, numpy as np, tqstream as t
fr = [f for f in t.read(open("c.tq", "rb").read()) if f["name"] in ("emb", "emb_scale", "emb_ranges")]
out = b""
for f in fr:
    if f["name"] == "emb_scale":
        out += t.frame(f["name"], f["dtype"], [1], f["raw"][:4])
    elif f["name"] == "emb":
        out += t.frame(f["name"], f["dtype"], [1, f["dims"][1]], f["raw"][:len(f["raw"]) // f["dims"][0]])
        break
    else:
        out += t.frame(f["name"], f["dtype"], f["dims"], f["raw"])
open("q1.tq", "wb").write(out)'
        QR decode q1.tq q1f.tq
        tq-score --query q1.tq < c.tq | tq-cat -t tsv --name key,score,rank > a.tsv
        tq-score --query q1f.tq < f.tq | tq-cat -t tsv --name key,score,rank > b.tsv
        diff a.tsv b.tsv
    done
    for c in f16 bf16 int8 uint8 int8r q8_0 q4_0 q2 bit; do
        code_of "$c" < x.tq > c.tq
        QR decode c.tq f.tq
        tq-attend --self --heads 2 --q emb < c.tq | tq-cat -t tsv --name out > a.tsv
        tq-attend --self --heads 2 --q emb < f.tq | tq-cat -t tsv --name out > b.tsv
        diff a.tsv b.tsv
    done
    # int8 without its scales is refused, not read as plain numbers
    tq-quantize --to int8 < x.tq | py -c '
import sys, tqstream as t
fr = t.read(sys.stdin.buffer.read())
sys.stdout.buffer.write(b"".join(t.frame(f["name"], f["dtype"], f["dims"], f["raw"], meta=f["meta"])
                                 for f in fr if f["name"] != "emb_scale"))' > noscale.tq
    run --separate-stderr tq-score --consensus < noscale.tq
    [ "$status" -eq 65 ] && [[ "$stderr" == *emb_scale* ]]
    run --separate-stderr tq-score --query noscale.tq < x.tq
    [ "$status" -eq 65 ] && [[ "$stderr" == *emb_scale* ]] && [ "${#stderr_lines[@]}" -eq 1 ]
    run --separate-stderr tq-attend --self --heads 2 --q emb < noscale.tq
    [ "$status" -eq 65 ] && [[ "$stderr" == *emb_scale* ]]
    # nor uint8 codes without their ranges
    code_of uint8 < x.tq | py -c '
import sys, tqstream as t
fr = t.read(sys.stdin.buffer.read())
sys.stdout.buffer.write(b"".join(t.frame(f["name"], f["dtype"], f["dims"], f["raw"], meta=f["meta"])
                                 for f in fr if f["name"] != "emb_ranges"))' > noranges.tq
    for cmd in "tq-score --consensus" "tq-attend --self --heads 2 --q emb" "tq-simmat --topk 2" \
               "tq-train --epochs 1 --y note"; do
        run --separate-stderr $cmd < noranges.tq
        echo "$cmd: $status $stderr"
        [ "$status" -eq 65 ] && [[ "$stderr" == *emb_ranges* ]] && [ "${#stderr_lines[@]}" -eq 1 ]
    done
}

@test "--ranges FILE: the ranges from FILE, the rows from the input, even of one name; widths must agree" {
    printf 'the cat sat\n' > q.txt
    printf 'a dog ran\nthe cat sat on the mat\n' > c.txt
    tq-embed -m hash:8 q.txt > q8.tq
    tq-embed -m hash:384 c.txt > calib.tq
    tq-embed -m hash:384 q.txt > q384.tq
    # "emb" in both: the ranges of calib.tq's rows, applied to the input's row
    tq-quantize --to uint8 --ranges calib.tq < q384.tq > a.tq
    tq-quantize --to uint8 --ranges calib.tq q384.tq > b.tq
    cmp a.tq b.tq
    run py -c '
import numpy as np, tqstream as t
fr = t.read(open("a.tq", "rb").read())
rng = [t.to_numpy(f) for f in fr if f["name"] == "emb_ranges"][0]
cal = np.concatenate([t.to_numpy(f) for f in t.read(open("calib.tq", "rb").read()) if f["name"] == "emb"])
assert np.array_equal(rng[0], cal.min(0)) and np.array_equal(rng[1], cal.max(0))
assert [t.to_numpy(f).shape for f in fr if f["name"] == "emb"] == [(1, 384)]
print("ok")'
    assert_output "ok"
    run --separate-stderr sh -c 'tq-quantize --to uint8 --ranges calib.tq < q8.tq > bad.tq'
    [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [ "$stderr" = 'tq-quantize: error: frame 1 "emb": the ranges from calib.tq have 384 dimensions, the rows from standard input 8' ]
}
