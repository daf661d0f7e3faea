#!/usr/bin/env bats
# tq-cat: text views, imports and exports, pass-through, (de)compression, and
# errors. Inputs are built with numpy and tests/lib/tqstream.py (independent of
# libtq); outputs are parsed back in Python and compared exactly with the
# arrays fed in (floats bit for bit; NaN only as NaN where text cannot carry a
# payload).
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    # ref.py: the reference side of the checks, shared by the tests below.
    cat > ref.py <<'EOF'
import csv, io, json, struct, sys
import numpy as np
import tqstream as tq

def bits(a):
    a = np.ascontiguousarray(a)
    return a.view("u%d" % a.dtype.itemsize) if a.dtype.kind == "f" else a

def same(got, want, nan_payload=True):
    """Exact equality: same shape and dtype, floats bit for bit (NaN payloads
    too unless nan_payload is False: text writes every NaN as nan)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind == "f" and not nan_payload:
        gn, wn = np.isnan(got), np.isnan(want)
        assert (gn == wn).all(), "NaN positions differ"
        got, want = np.where(wn, 0, got).astype(want.dtype), np.where(wn, 0, want).astype(want.dtype)
    bad = np.flatnonzero(bits(got).ravel() != bits(want).ravel())
    assert bad.size == 0, "%d values differ, first at %d: %r vs %r" % (
        bad.size, bad[0], got.ravel()[bad[0]], want.ravel()[bad[0]])

def bf16_bits(f32):
    """f32 -> bf16 bits, rounding to nearest even (no NaN here)."""
    u = np.asarray(f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    s16, one = np.uint64(16), np.uint64(1)
    return ((u + np.uint64(0x7fff) + ((u >> s16) & one)) >> s16).astype(np.uint16)

def text_value(s, dtype):
    """A printed number (text, or as json.loads gave it) read back as a value of
    dtype, as strtod/strtof would."""
    if dtype == "bf16":
        return bf16_bits(np.float32(float(s)))
    if dtype in ("i8", "u8", "i16", "i32", "i64"):
        return np.dtype(tq.NUMPY[dtype]).type(int(s))
    return np.dtype(tq.NUMPY[dtype]).type(float(s))

def tsv_unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s) and s[i + 1] in "tnr\\":
            out.append({"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[s[i + 1]]); i += 2
        else:
            out.append(s[i]); i += 1
    return "".join(out)

def interesting_f32(n, seed):
    """Random bit patterns plus the edge cases: -0, subnormals, extremes, inf, NaN."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    a = u.view(np.float32).copy()
    a[np.isnan(a)] = 1.5
    edge = np.array([0.0, -0.0, 1e-45, -1.4e-45, 1.17549435e-38, 3.4028235e38, -3.4028235e38,
                     np.inf, -np.inf, np.nan, 0.1, 1.0, 16777217.0, 123456789.0], dtype=np.float32)
    k = min(n, edge.size)
    a[:k] = edge[:k]
    return a

def stream(frames):
    return b"".join(frames)

def read_stream(path):
    return tq.read(open(path, "rb").read())

def arrays(path, name):
    """The frames of NAME in a stream, batches concatenated along rows."""
    fs = [f for f in read_stream(path) if f["name"] == name]
    parts = [tq.to_numpy(f) for f in fs]
    if fs and fs[0]["dtype"] == "str":
        return sum(parts, [])
    return np.concatenate(parts) if len(parts) > 1 else parts[0]
EOF
}

# ------------------------------------------------------------------ text output

@test "tsv: keys first, every value reads back exactly, across batches" {
    py - <<'EOF'
from ref import *
a = interesting_f32(4 * 5 * 3, 1).reshape(20, 3)
keys = ["k%d" % i for i in range(20)]
keys[3] = "tab\there"; keys[4] = "new\nline"; keys[5] = "back\\slash"; keys[6] = ""
keys[7] = "caf\u00e9 \U0001F600"; keys[8] = "nul\0byte"
fr = []
for b in range(4):  # data frame before its key: the key column still comes first
    fr.append(tq.array_frame("emb", a[5*b:5*b+5]))
    fr.append(tq.frame("key", "str", [5], tq.str_payload(keys[5*b:5*b+5])))
open("s.tq", "wb").write(stream(fr))
EOF
    run --separate-stderr tq-cat -t tsv s.tq
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    tq-cat -t tsv s.tq > out.tsv
    tq-cat -t tsv --tail 20 s.tq > tail.tsv
    cmp out.tsv tail.tsv   # --tail keeps rows whole, NUL bytes included
    py - <<'EOF'
from ref import *
a = interesting_f32(60, 1).reshape(20, 3)
lines = open("out.tsv", encoding="utf-8").read().split("\n")[:-1]
assert lines[0] == "key\temb[0]\temb[1]\temb[2]", lines[0]
rows = [l.split("\t") for l in lines[1:]]
assert len(rows) == 20 and all(len(r) == 4 for r in rows), len(rows)
keys = [tsv_unescape(r[0]) for r in rows]
assert keys[3:9] == ["tab\there", "new\nline", "back\\slash", "", "caf\u00e9 \U0001F600", "nul\0byte"], keys[3:9]
assert keys[10] == "k10"
got = np.array([[text_value(v, "f32") for v in r[1:]] for r in rows], dtype=np.float32)
same(got, a, nan_payload=False)
EOF
}

@test "csv: RFC 4180 quoting of keys, values exact" {
    py - <<'EOF'
from ref import *
a = interesting_f32(12, 2).reshape(4, 3)
keys = ['plain', 'com,ma', 'quo"te', 'line\nbreak']
open("s.tq", "wb").write(stream([tq.frame("key", "str", [4], tq.str_payload(keys)),
                                 tq.array_frame("v", a)]))
EOF
    tq-cat -t csv s.tq > out.csv
    py - <<'EOF'
from ref import *
a = interesting_f32(12, 2).reshape(4, 3)
rows = list(csv.reader(open("out.csv", newline="", encoding="utf-8")))
assert rows[0] == ["key", "v[0]", "v[1]", "v[2]"], rows[0]
assert [r[0] for r in rows[1:]] == ['plain', 'com,ma', 'quo"te', 'line\nbreak']
same(np.array([[text_value(v, "f32") for v in r[1:]] for r in rows[1:]], dtype=np.float32), a,
     nan_payload=False)
EOF
}

@test "jsonl: every dtype, nested rows for rank 3, NaN and infinities as Python reads them" {
    py - <<'EOF'
from ref import *
rng = np.random.default_rng(3)
n = 6
f64 = rng.integers(0, 2**64, n * 2, dtype=np.uint64).view(np.float64).copy()
f64[np.isnan(f64)] = 2.0
f64[:4] = [5e-324, -0.0, 1.7976931348623157e308, 0.1]
f16 = rng.integers(0, 2**16, n * 3, dtype=np.uint64).astype(np.uint16).view(np.float16).copy()
f16[np.isnan(f16)] = 1.0
bf = rng.integers(0, 2**16, n * 2, dtype=np.uint64).astype(np.uint16)
bf[((bf & 0x7f80) == 0x7f80) & ((bf & 0x7f) != 0)] = 0x3fc0  # NaN patterns -> 1.5
bf[:3] = [0x7f80, 0xff80, 0x8000]                             # inf, -inf, -0
arrs = {
  "a_f64": f64.reshape(n, 2),
  "a_f32": interesting_f32(n * 2 * 2, 4).reshape(n, 2, 2),
  "a_f16": f16.reshape(n, 3),
  "a_i8": np.array([-128, 127, 0, -1, 5, 9], dtype=np.int8),
  "a_u8": rng.integers(0, 256, (n, 2)).astype(np.uint8),
  "a_i16": np.array([-32768, 32767, 0, 1, -1, 7], dtype=np.int16).reshape(n, 1),
  "a_i32": np.array([-2**31, 2**31 - 1, 0, 1, -1, 7], dtype=np.int32),
  "a_i64": np.array([-2**63, 2**63 - 1, 0, 2**53 + 1, -1, 7], dtype=np.int64),
}
fr = [tq.frame("key", "i64", [n], np.arange(n, dtype="<i8").tobytes())]
fr += [tq.array_frame(k, v) for k, v in arrs.items()]
fr.append(tq.frame("a_bf16", "bf16", [n, 2], bf.astype("<u2").tobytes()))
arrs["a_bf16"] = bf.reshape(n, 2)
open("s.tq", "wb").write(stream(fr))
np.savez("want.npz", **arrs)
EOF
    tq-cat -t jsonl s.tq > out.jsonl
    py - <<'EOF'
from ref import *
want = dict(np.load("want.npz"))
rows = [json.loads(l) for l in open("out.jsonl", encoding="utf-8")]
assert len(rows) == 6
assert list(rows[0].keys())[0] == "key" and [r["key"] for r in rows] == list(range(6))
for name, a in want.items():
    dt = name[2:]
    got = [[text_value(x, dt) for x in np.ravel(np.array(r[name], dtype=object))] for r in rows]
    same(np.array(got).reshape(a.shape), a, nan_payload=False)
# the text itself: the special values are spelled as JSON readers know them
text = open("out.jsonl").read()
assert "NaN" in text and "-Infinity" in text and "Infinity" in text
EOF
}

@test "floats print as the shortest text that reads back exactly (numpy's shortest repr)" {
    py - <<'EOF'
from ref import *
p2 = np.arange(-149, 128)
a = np.concatenate([interesting_f32(20000, 6), np.float32(2.0) ** p2.astype(np.float32),
                    -np.float32(2.0) ** p2.astype(np.float32)])
d = np.random.default_rng(7).integers(0, 2**64, 20000, dtype=np.uint64).view(np.float64)
d = np.concatenate([d, 2.0 ** np.arange(-1074, 1024), -(2.0 ** np.arange(-1074, 1024))])
h = np.arange(2**16, dtype=np.uint64).astype(np.uint16).view(np.float16)  # every f16
for name, v in (("a", a), ("d", d), ("h", h)):
    v = v[np.isfinite(v)]
    open(name + ".tq", "wb").write(stream([tq.array_frame(name, v)]))
    np.save(name + ".npy", v)
EOF
    for n in a d h; do tq-cat -t tsv --no-header $n.tq > $n.txt; done
    py - <<'EOF'
from ref import *
def digits(s):
    m = s.lstrip("-").split("e")[0].replace(".", "").strip("0")
    return len(m) if m else 1
for name in "adh":
    vals = np.load(name + ".npy"); lines = open(name + ".txt").read().split()
    assert len(lines) == len(vals)
    for s, v in zip(lines, vals):
        back = vals.dtype.type(float(s))
        assert back == v and np.signbit(back) == np.signbit(v), (s, v)
        # as few digits as numpy's shortest round-trip repr (Dragon4, unique=True)
        assert digits(s) == digits(np.format_float_scientific(v, unique=True)), (s, v)
EOF
}

@test "block codes and sign bits print as their dequantized values" {
    py - <<'EOF'
from ref import *
rng = np.random.default_rng(9)
n, d = 3, 64
d8 = rng.standard_normal((n, d // 32)).astype(np.float16)
q8 = rng.integers(-127, 128, (n, d // 32, 32)).astype(np.int8)
blob8 = b"".join(d8[i, b].tobytes() + q8[i, b].tobytes() for i in range(n) for b in range(d // 32))
want8 = (q8.astype(np.float32) * d8.astype(np.float32)[:, :, None]).reshape(n, d)
d4 = rng.standard_normal((n, d // 32)).astype(np.float16)
q4 = rng.integers(0, 16, (n, d // 32, 32)).astype(np.uint8)
blob4 = b"".join(d4[i, b].tobytes() + (q4[i, b, :16] | (q4[i, b, 16:] << 4)).astype(np.uint8).tobytes()
                 for i in range(n) for b in range(d // 32))
want4 = ((q4.astype(np.float32) - 8) * d4.astype(np.float32)[:, :, None]).reshape(n, d)
bits = rng.integers(0, 2, (n, 10)).astype(np.uint8)
wantb = np.where(bits == 1, 1.0, -1.0).astype(np.float32)
open("s.tq", "wb").write(stream([tq.frame("q8", "q8_0", [n, d], blob8), tq.frame("q4", "q4_0", [n, d], blob4),
                                 tq.frame("b", "bit", [n, 10], np.packbits(bits, axis=1).tobytes())]))
np.savez("want.npz", q8=want8, q4=want4, b=wantb)
EOF
    tq-cat -t tsv s.tq > out.tsv
    py - <<'EOF'
from ref import *
w = np.load("want.npz")
lines = open("out.tsv").read().split("\n")[:-1]
hdr = lines[0].split("\t")
assert hdr[:2] == ["q8[0]", "q8[1]"] and hdr[64] == "q4[0]" and hdr[-1] == "b[9]", hdr[-1]
v = np.array([[np.float32(float(x)) for x in l.split("\t")] for l in lines[1:]], dtype=np.float32)
same(v[:, :64], w["q8"]); same(v[:, 64:128], w["q4"]); same(v[:, 128:], w["b"])
EOF
}

@test "--head and --tail count rows over the whole tensor, across batches" {
    py - <<'EOF'
from ref import *
fr = []
for b in range(4):
    fr.append(tq.frame("key", "str", [5], tq.str_payload(["r%d" % (5 * b + i) for i in range(5)])))
    fr.append(tq.array_frame("v", np.arange(5 * b, 5 * b + 5, dtype=np.int32)))
open("s.tq", "wb").write(stream(fr))
EOF
    run tq-cat -t tsv --head 7 s.tq
    [ "$status" -eq 0 ]
    [ "$output" = "$(printf 'key\tv'; for i in 0 1 2 3 4 5 6; do printf '\nr%d\t%d' $i $i; done)" ]
    run tq-cat -t tsv --tail 7 s.tq
    [ "$status" -eq 0 ]
    [ "$output" = "$(printf 'key\tv'; for i in 13 14 15 16 17 18 19; do printf '\nr%d\t%d' $i $i; done)" ]
    run tq-cat -t csv --tail 0 s.tq
    [ "$output" = "key,v" ]
    run tq-cat -t jsonl --head 1 s.tq
    [ "$output" = '{"key":"r0","v":0}' ]
    run tq-cat -t jsonl --tail 100 s.tq
    [ "${#lines[@]}" -eq 20 ]
    [ "${lines[19]}" = '{"key":"r19","v":19}' ]
}

# bats test_tags=san:sample
@test "--tail keeps memory bounded by its rows, not by the input" {
    [ -x /usr/bin/time ] || skip "/usr/bin/time is not installed"
    # 256 MiB of f32 in 16 MiB batches; the last 2 rows need a few MiB at most
    py - <<'EOF'
from ref import *
fr = [tq.array_frame("x", np.full((4096, 1024), b, dtype=np.float32)) for b in range(16)]
open("big.tq", "wb").write(stream(fr))
EOF
    run --separate-stderr /usr/bin/time -f '%M' tq-cat -t tsv --tail 2 --no-header big.tq
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 2 ]
    [ "${lines[1]%%$'\t'*}" = "15" ]
    # peak resident KiB: one 16 MiB frame, its copy and the reader's buffers
    [ "${stderr##*$'\n'}" -lt 120000 ]
}

@test "tensors stored one after the other print as separate tables" {
    py - <<'EOF'
from ref import *
fr = [tq.array_frame("k", np.array([[i, -i]], dtype=np.int16)) for i in range(3)]
fr += [tq.array_frame("v", np.array([10 + i], dtype=np.int8)) for i in range(3)]
open("s.tq", "wb").write(stream(fr))
EOF
    run tq-cat -t tsv s.tq
    [ "$status" -eq 0 ]
    [ "$output" = "$(printf 'k[0]\tk[1]\n0\t0\n1\t-1\n2\t-2\n\nv\n10\n11\n12')" ]
    run tq-cat -t tsv --tail 1 s.tq
    [ "$output" = "$(printf 'k[0]\tk[1]\n2\t-2\n\nv\n12')" ]
    run tq-cat -t jsonl --head 1 s.tq
    [ "$output" = "$(printf '{"k":[0,0]}\n{"v":10}')" ]
}

@test "--name selects frames for text and for the stream (passed through byte for byte)" {
    py - <<'EOF'
from ref import *
fr = []
for b in range(2):
    fr.append(tq.frame("key", "str", [2], tq.str_payload(["a%d" % b, "b%d" % b])))
    fr.append(tq.array_frame("emb", np.full((2, 2), b, dtype=np.float32), meta={"model": "m"}))
    fr.append(tq.array_frame("score", np.array([b, b], dtype=np.float64), compress=True))
open("s.tq", "wb").write(stream(fr))
open("want.tq", "wb").write(fr[1] + fr[2] + fr[4] + fr[5])
EOF
    tq-cat --name emb,score s.tq > got.tq
    cmp got.tq want.tq
    tq-cat --name emb --name score s.tq > got2.tq
    cmp got2.tq want.tq
    run tq-cat -t tsv --name key,score s.tq
    [ "$output" = "$(printf 'key\tscore\na0\t0\nb0\t0\na1\t1\nb1\t1')" ]
    run tq-cat -t tsv --name nothing s.tq
    [ "$status" -eq 0 ]
    [ -z "$output" ]
}

@test "| head: a closed pipe ends tq-cat quietly" {
    py - <<'EOF'
from ref import *
open("big.tq", "wb").write(stream([tq.array_frame("x", np.ones((20000, 64), dtype=np.float32))] * 4))
EOF
    run --separate-stderr bash -c 'set -o pipefail; tq-cat -t tsv big.tq | head -1'
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [ "$output" = "$(printf 'x[%d]\t' $(seq 0 62))x[63]" ]
    run --separate-stderr bash -c 'set -o pipefail; tq-cat big.tq | head -c 100 >/dev/null'
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
}

# ------------------------------------------------------------------ imports

@test "import csv and tsv: header, key column, batches, values exact" {
    py - <<'EOF'
from ref import *
a = interesting_f32(7 * 3, 10).reshape(7, 3); a[np.isnan(a)] = 0
keys = ["w%d" % i for i in range(7)]; keys[2] = 'with,comma "q"'; keys[3] = "multi\nline"
with open("v.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\r\n")
    w.writerow(["key", "a", "b", "c"])
    for k, r in zip(keys, a):
        w.writerow([k] + [repr(float(x)) for x in r])
keys_t = [k.replace("\\", "\\\\").replace("\n", "\\n") for k in keys]
with open("v.tsv", "w") as f:
    f.write("id\tkey\tx\ty\n")
    for k, r in zip(keys_t, a):
        f.write("\t".join([repr(float(r[0])), k] + [repr(float(x)) for x in r[1:]]) + "\n")
    f.write("\n")  # a blank line at the end is skipped
with open("plain.csv", "w") as f:  # no header: every column is a number
    for r in a:
        f.write(",".join("%r" % float(x) for x in r) + "\n")
EOF
    tq-cat --from csv --as emb --batch 3 v.csv > c.tq
    tq-cat --from tsv v.tsv > t.tq
    tq-cat --from csv --dtype f64 plain.csv > p.tq
    py - <<'EOF'
from ref import *
a = interesting_f32(21, 10).reshape(7, 3); a[np.isnan(a)] = 0
keys = ["w%d" % i for i in range(7)]; keys[2] = 'with,comma "q"'; keys[3] = "multi\nline"
fr = read_stream("c.tq")
assert [(f["name"], f["dims"]) for f in fr] == [("key", [3]), ("emb", [3, 3]), ("key", [3]),
        ("emb", [3, 3]), ("key", [1]), ("emb", [1, 3])], [(f["name"], f["dims"]) for f in fr]
assert arrays("c.tq", "key") == keys
same(arrays("c.tq", "emb"), a)
assert arrays("t.tq", "key") == keys
same(arrays("t.tq", "x"), a)
same(arrays("p.tq", "x"), a.astype(np.float64))
assert [f["name"] for f in read_stream("p.tq")] == ["x"]
EOF
}

@test "import jsonl: objects, bare arrays and numbers, integer keys, dtypes" {
    py - <<'EOF'
from ref import *
a = interesting_f32(5 * 4, 11).reshape(5, 2, 2); a[~np.isfinite(a)] = 1
with open("o.jsonl", "w") as f:
    for i in range(5):
        f.write(json.dumps({"key": "id\u00e9\"%d" % i, "m": [[float(x) for x in r] for r in a[i]],
                            "s": i - 2}) + "\n")
with open("k.jsonl", "w") as f:
    for i in range(5):
        f.write(json.dumps({"v": [i, -i], "key": 1000 + i}) + "\n")
with open("b.jsonl", "w") as f:
    for i in range(5):
        f.write(json.dumps([int(x) for x in range(i, i + 3)]) + "\n")
with open("n.jsonl", "w") as f:
    f.write("1.5\n-2\nNaN\n-Infinity\n")
EOF
    tq-cat --from jsonl --batch 2 o.jsonl > o.tq
    tq-cat --from jsonl --dtype i32 k.jsonl > k.tq
    tq-cat --from jsonl --dtype i64 --as ids b.jsonl > b.tq
    tq-cat --from jsonl --dtype f64 n.jsonl > n.tq
    py - <<'EOF'
from ref import *
a = interesting_f32(20, 11).reshape(5, 2, 2); a[~np.isfinite(a)] = 1
fr = read_stream("o.tq")
assert [f["name"] for f in fr[:3]] == ["key", "m", "s"] and [f["dims"] for f in fr[:3]] == [[2], [2, 2, 2], [2]]
assert arrays("o.tq", "key") == ["id\u00e9\"%d" % i for i in range(5)]
same(arrays("o.tq", "m"), a)
same(arrays("o.tq", "s"), np.arange(-2, 3, dtype=np.float32))
fk = read_stream("k.tq")
assert [f["name"] for f in fk] == ["key", "v"], "keys come first"
same(arrays("k.tq", "key"), np.arange(1000, 1005, dtype=np.int64))
same(arrays("k.tq", "v"), np.array([[i, -i] for i in range(5)], dtype=np.int32))
same(arrays("b.tq", "ids"), np.array([range(i, i + 3) for i in range(5)], dtype=np.int64))
same(arrays("n.tq", "x"), np.array([1.5, -2, np.nan, -np.inf]), nan_payload=False)
EOF
}

@test "text print and import round-trip exactly (tsv, csv, jsonl)" {
    py - <<'EOF'
from ref import *
a = interesting_f32(9 * 4, 12).reshape(9, 4); a[np.isnan(a)] = 3
keys = ["a\tb", "c\\d", "e\nf", "g,h", 'i"j', "k", "l", "m", "\u00f1"]
open("s.tq", "wb").write(stream([tq.frame("key", "str", [9], tq.str_payload(keys)), tq.array_frame("x", a)]))
EOF
    for fmt in tsv csv jsonl; do
        tq-cat -t $fmt s.tq | tq-cat --from $fmt > back-$fmt.tq
    done
    py - <<'EOF'
from ref import *
for fmt in ("tsv", "csv", "jsonl"):
    assert arrays("back-%s.tq" % fmt, "key") == arrays("s.tq", "key"), fmt
    same(arrays("back-%s.tq" % fmt, "x"), arrays("s.tq", "x"))
EOF
}

@test "import npy: every dtype, both byte orders, batches, Fortran order, versions 1 to 3" {
    py - <<'EOF'
from ref import *
rng = np.random.default_rng(13)
for t in ("f2", "f4", "f8", "i1", "u1", "i2", "i4", "i8"):
    for o in "<>":
        a = rng.integers(0, 256, (7, 3, 2) if t != "i8" else (7, 6), dtype=np.uint8)
        raw = rng.integers(0, 256, int(np.prod(a.shape)) * int(t[1]), dtype=np.uint8).tobytes()
        arr = np.frombuffer(raw, dtype=o + t if t[1] != "1" else t).reshape(a.shape)
        np.save("%s%s.npy" % ("le" if o == "<" else "be", t), arr)
b = rng.standard_normal((5, 3, 4)).astype(">f4")
np.save("fortran.npy", np.asfortranarray(b))
np.save("bool.npy", np.array([[True, False], [False, True]]))
np.save("scalar.npy", np.array(2.5, dtype="<f8"))
np.save("empty.npy", np.zeros((0, 5), dtype="<i2"))
for v in ((2, 0), (3, 0)):
    with open("v%d.npy" % v[0], "wb") as f:
        np.lib.format.write_array(f, b, version=v)
EOF
    for f in le*.npy be*.npy fortran.npy bool.npy scalar.npy empty.npy v2.npy v3.npy; do
        tq-cat --from npy --batch 2 "$f" > "${f%.npy}.tq"
    done
    py - <<'EOF'
from ref import *
import glob
for path in sorted(glob.glob("le*.npy") + glob.glob("be*.npy")) + ["fortran.npy", "v2.npy", "v3.npy"]:
    want = np.load(path)
    fr = read_stream(path[:-4] + ".tq")
    assert all(f["dims"][0] <= 2 for f in fr), path
    assert len(fr) == (want.shape[0] + 1) // 2, path
    le = want.astype(want.dtype.newbyteorder("<"))
    # the bytes of the stream are the little-endian bytes of the array, C order
    assert b"".join(f["raw"] for f in fr) == np.ascontiguousarray(le).tobytes(), path
    same(arrays(path[:-4] + ".tq", "x"), np.ascontiguousarray(le))
same(arrays("bool.tq", "x"), np.array([[1, 0], [0, 1]], dtype=np.uint8))
f = read_stream("scalar.tq"); assert f[0]["dims"] == [] and tq.to_numpy(f[0]) == 2.5
f = read_stream("empty.tq"); assert len(f) == 1 and f[0]["dims"] == [0, 5] and f[0]["dtype"] == "i16"
EOF
}

@test "npy -> tq -> npy is byte-exact for every dtype, NaN payloads and -0.0 included" {
    py - <<'EOF'
from ref import *
rng = np.random.default_rng(14)
for t in ("f2", "f4", "f8", "i1", "u1", "i2", "i4", "i8"):
    n = 1000 * 8 // int(t[1])
    raw = rng.integers(0, 256, n * int(t[1]), dtype=np.uint8).tobytes()
    a = np.frombuffer(raw, dtype=np.dtype(t).newbyteorder("<")).reshape(-1, 4).copy()
    if t[0] == "f":
        u = a.view("u%s" % t[1])
        ones = (1 << (8 * int(t[1]))) - 1
        u[0, 0] = 1 << (8 * int(t[1]) - 1)  # -0.0
        u[0, 1] = ones                      # a NaN with every payload bit set
        u[0, 2] = (ones >> 1) ^ 1           # a positive NaN with an odd payload
    np.save("%s.npy" % t, a)
EOF
    for t in f2 f4 f8 i1 u1 i2 i4 i8; do
        tq-cat --from npy --batch 7 $t.npy | tq-cat -z | tq-cat --to npy -o back-$t.npy
        tq-cat --from npy $t.npy | tq-cat --to npy > redirect-$t.npy
    done
    py - <<'EOF'
from ref import *
for t in ("f2", "f4", "f8", "i1", "u1", "i2", "i4", "i8"):
    a = np.load("%s.npy" % t)
    for p in ("back-%s.npy" % t, "redirect-%s.npy" % t):
        b = np.load(p)
        assert b.dtype == a.dtype and b.shape == a.shape, (p, b.dtype, b.shape)
        assert b.tobytes() == a.tobytes(), p
        # numpy's own header rules: version 1.0, data aligned to 64 bytes
        with open(p, "rb") as f:
            assert np.lib.format.read_magic(f) == (1, 0)
            np.lib.format.read_array_header_1_0(f)
            assert f.tell() % 64 == 0
EOF
}

# ------------------------------------------------------------------ exports

@test "export safetensors: tensors concatenated by name, metadata, str skipped" {
    py - <<'EOF'
from ref import *
rng = np.random.default_rng(15)
emb = rng.standard_normal((7, 3)).astype(np.float32)
ids = np.arange(7, dtype=np.int64) * -3
bf = rng.integers(0, 2**16, (7, 2), dtype=np.uint64).astype(np.uint16)
fr = []
for lo, hi in ((0, 3), (3, 5), (5, 7)):
    fr.append(tq.frame("key", "str", [hi - lo], tq.str_payload(["k"] * (hi - lo))))
    fr.append(tq.array_frame("emb", emb[lo:hi], meta={"model": "m\"1", "dim": "3"}))
    fr.append(tq.array_frame("ids", ids[lo:hi], compress=True))
    fr.append(tq.frame("h", "bf16", [hi - lo, 2], bf[lo:hi].astype("<u2").tobytes()))
fr.append(tq.array_frame("f16", np.float16([1.5, -0.0])))
for t in ("f8", "i1", "u1", "i2", "i4"):
    fr.append(tq.array_frame("t_" + t, rng.integers(-100, 100, (2, 2)).astype(t)))
open("s.tq", "wb").write(stream(fr))
np.savez("want.npz", emb=emb, ids=ids, h=bf)
EOF
    run --separate-stderr tq-cat --to safetensors -o out.safetensors s.tq
    [ "$status" -eq 0 ]
    [[ "$stderr" == *'skipping frame "key": safetensors has no str dtype'* ]]
    py - <<'EOF'
from ref import *
w = np.load("want.npz")
b = open("out.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
hdr = json.loads(b[8:8 + n]); data = b[8 + n:]
assert (8 + n) % 8 == 0
meta = hdr.pop("__metadata__")
assert meta == {"emb.model": 'm"1', "emb.dim": "3"}, meta
assert "key" not in hdr
# offsets tile the data without holes or overlap
spans = sorted(tuple(v["data_offsets"]) for v in hdr.values())
assert spans[0][0] == 0 and spans[-1][1] == len(data)
assert all(a[1] == b_[0] for a, b_ in zip(spans, spans[1:]))
np_of = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I8": "i1", "U8": "u1", "I16": "<i2",
         "I32": "<i4", "I64": "<i8", "BF16": "<u2"}
def get(name):
    v = hdr[name]; lo, hi = v["data_offsets"]
    return np.frombuffer(data[lo:hi], dtype=np_of[v["dtype"]]).reshape(v["shape"]), v["dtype"]
a, dt = get("emb"); assert dt == "F32"; same(a, w["emb"])
a, dt = get("ids"); assert dt == "I64"; same(a, w["ids"])
a, dt = get("h"); assert dt == "BF16"; same(a, w["h"])
a, dt = get("f16"); assert dt == "F16"; same(a, np.float16([1.5, -0.0]))
src = {f["name"]: tq.to_numpy(f) for f in read_stream("s.tq") if f["name"].startswith("t_")}
st_name = {"f8": "F64", "i1": "I8", "u1": "U8", "i2": "I16", "i4": "I32"}
for name, want in src.items():
    a, dt = get(name); assert dt == st_name[name[2:]], (name, dt)
    same(a, want.astype(want.dtype.newbyteorder("<")))
EOF
}

@test "export npy needs one tensor: --name picks it, str and bf16 are refused" {
    py - <<'EOF'
from ref import *
fr = []
for b in range(3):
    fr.append(tq.array_frame("emb", np.full((2, 3), b, dtype=np.float32)))
    fr.append(tq.frame("key", "str", [2], tq.str_payload(["a", "b"])))
fr.append(tq.frame("h", "bf16", [1], b"\x80\x3f"))
open("s.tq", "wb").write(stream(fr))
EOF
    run tq-cat --to npy -o x.npy s.tq
    [ "$status" -eq 2 ]
    [[ "$output" == *"more than one frame could be the tensor"*'("emb", "key")'*"--name"* ]]
    [ ! -e x.npy ]
    run tq-cat --to npy -o x.npy --name key s.tq
    [ "$status" -eq 65 ]
    [[ "$output" == *'"key" is str'* ]]
    run tq-cat --to npy -o x.npy --name h s.tq
    [ "$status" -eq 65 ]
    [ ! -e x.npy ]
    tq-cat --to npy -o x.npy --name emb s.tq
    py -c 'import numpy as np; a = np.load("x.npy"); assert (a == np.repeat(np.arange(3, dtype=np.float32), 2)[:, None] * np.ones(3, np.float32)).all() and a.shape == (6, 3)'
    run tq-cat --to npy s.tq
    [ "$status" -eq 2 ]   # standard output is a pipe here: the header is written last
    [[ "$output" == *"not a pipe"* ]]
}

# ------------------------------------------------------------------ stream

@test "-z compresses every payload, -Z undoes it, values unchanged" {
    py - <<'EOF'
from ref import *
fr = [tq.frame("key", "str", [3], tq.str_payload(["x", "y", "z"])),
      tq.array_frame("emb", np.arange(3000, dtype=np.float32).reshape(3, 1000), meta={"a": "b"}),
      tq.array_frame("emb", np.zeros((2, 1000), dtype=np.float32))]
open("s.tq", "wb").write(stream(fr))
EOF
    tq-cat -z s.tq > z.tq
    tq-cat --compress=9 s.tq > z9.tq
    tq-cat -Z z.tq > u.tq
    run tq-cat --info z.tq
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | awk 'NR > 1 { print $NF }' | sort -u)" = zlib ]
    py - <<'EOF'
from ref import *
src, z, z9, u = (read_stream(p) for p in ("s.tq", "z.tq", "z9.tq", "u.tq"))
assert all(f["flags"] == 1 for f in z + z9) and all(f["flags"] == 0 for f in u)
for a in (z, z9, u):
    assert [(f["name"], f["dtype"], f["dims"], f["meta"], f["raw"]) for f in a] == \
           [(f["name"], f["dtype"], f["dims"], f["meta"], f["raw"]) for f in src]
assert len(open("z.tq", "rb").read()) < len(open("s.tq", "rb").read()) // 4
# uncompressed again, the stream is the one tqstream.py wrote, byte for byte
assert open("u.tq", "rb").read() == open("s.tq", "rb").read()
EOF
}

@test "concatenates files and standard input in order, byte for byte" {
    py - <<'EOF'
from ref import *
for i, n in enumerate("abc"):
    open(n + ".tq", "wb").write(tq.array_frame("x", np.full((2, 2), i, dtype=np.int32), compress=i == 1))
EOF
    tq-cat a.tq - c.tq < b.tq > all.tq
    cat a.tq b.tq c.tq > want.tq
    cmp all.tq want.tq
    run tq-cat -t tsv --no-header all.tq
    [ "$output" = "$(printf '0\t0\n0\t0\n1\t1\n1\t1\n2\t2\n2\t2')" ]
}

@test "info: a table of frames with dtype, shape, sizes and codec" {
    py - <<'EOF'
from ref import *
open("s.tq", "wb").write(tq.frame("key", "str", [2], tq.str_payload(["ab", "c"])) +
                         tq.array_frame("emb", np.zeros((2, 4), dtype=np.float16), compress=True))
EOF
    run tq-cat --info s.tq
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "frame  name             dtype shape                   stored       raw  codec" ]
    # str: 3 offsets of 8 bytes and 3 bytes of text; f16 2x4: 16 bytes raw
    [[ "${lines[1]}" =~ ^\ +0\ +key\ +str\ +2\ +27\ +27\ +-$ ]]
    [[ "${lines[2]}" =~ ^\ +1\ +emb\ +f16\ +2x4\ +[0-9]+\ +16\ +zlib$ ]]
}

# ------------------------------------------------------------------ errors

@test "a bad CSV line fails with its line number, exit 65, and leaves no -o file" {
    printf 'key,a,b\nx,1,2\ny,3,oops\n' > bad.csv
    run --separate-stderr tq-cat --from csv bad.csv -o out.tq
    [ "$status" -eq 65 ]
    [ "$stderr" = "tq-cat: error: bad.csv: line 3: column 3: not a number: 'oops'" ]
    [ ! -e out.tq ]
    [ -z "$(ls -A | grep -v -e '^bad.csv$' -e '^ref.py$' -e '^separate-stderr')" ]
    printf '1,2\n3\n' > short.csv
    run --separate-stderr tq-cat --from csv short.csv
    [ "$status" -eq 65 ]
    [[ "$stderr" == *"short.csv: line 2: 1 fields, the first line has 2" ]]
    printf '{"a":[1,2]}\n{"a":[1]}\n' > ragged.jsonl
    run --separate-stderr tq-cat --from jsonl ragged.jsonl
    [ "$status" -eq 65 ]
    [[ "$stderr" == *'ragged.jsonl: line 2: "a": an array of another shape than on the first line' ]]
    printf '1\t2\n' > int.tsv
    run --separate-stderr tq-cat --from tsv --dtype i8 int.tsv -o o.tq
    [ "$status" -eq 0 ]
    printf '1\t300\n' > int.tsv
    run --separate-stderr tq-cat --from tsv --dtype i8 int.tsv -o o2.tq
    [ "$status" -eq 65 ]
    [[ "$stderr" == *"line 1: column 2: integer out of range"* ]]
}

@test "npy: unsupported dtypes, truncated data and bad headers fail with 65" {
    py - <<'EOF'
import numpy as np
np.save("c.npy", np.zeros(3, dtype=np.complex64))
np.save("u.npy", np.array(["ab", "c"]))
np.save("o.npy", np.array([1, "x"], dtype=object), allow_pickle=True)
np.save("u4.npy", np.zeros(3, dtype="<u4"))
np.save("rec.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
np.save("ok.npy", np.arange(10, dtype="<f4"))
open("trunc.npy", "wb").write(open("ok.npy", "rb").read()[:-5])
open("extra.npy", "wb").write(open("ok.npy", "rb").read() + b"\0")
open("junk.npy", "wb").write(b"not an array at all")
EOF
    for f in c u o u4 rec trunc extra junk; do
        run --separate-stderr tq-cat --from npy $f.npy -o $f.tq
        [ "$status" -eq 65 ] || { echo "$f: $status $stderr"; false; }
        [[ "$stderr" == "tq-cat: error: $f.npy: "* ]]
        [ ! -e $f.tq ]
    done
    run --separate-stderr tq-cat --from npy u4.npy
    [[ "$stderr" == *"npy dtype '<u4' has no tq dtype"* ]]
    run --separate-stderr tq-cat --from npy trunc.npy
    [[ "$stderr" == *"truncated .npy data: 35 of 40 bytes"* ]]
}

@test "exit status: missing file 66, unwritable -o 73, usage 2, corrupt stream 65" {
    printf '1,2\n' > ok.csv
    run --separate-stderr tq-cat nosuch.tq
    [ "$status" -eq 66 ]
    [ "$stderr" = "tq-cat: error: nosuch.tq: cannot open: No such file or directory" ]
    run --separate-stderr tq-cat --from csv ok.csv nosuch.csv
    [ "$status" -eq 66 ]
    run --separate-stderr tq-cat --from csv ok.csv -o /nonexistent/dir/x.tq
    [ "$status" -eq 73 ]
    run --separate-stderr tq-cat --from csv ok.csv --to npy -o /nonexistent/x.npy
    [ "$status" -eq 73 ]
    run --separate-stderr tq-cat --from csv ok.csv -t tsv -o /nonexistent/x.tsv
    [ "$status" -eq 73 ]
    run --separate-stderr tq-cat --bogus
    [ "$status" -eq 2 ]
    [[ "$stderr" == "tq-cat: error: "*"see 'tq-cat --help'" ]]
    run --separate-stderr tq-cat -t xml ok.csv
    [ "$status" -eq 2 ]
    run --separate-stderr tq-cat --head 3 ok.csv
    [ "$status" -eq 2 ]
    run --separate-stderr tq-cat --from csv --as a --as b ok.csv
    [ "$status" -eq 2 ]
    run --separate-stderr tq-cat --from csv --as 'bad"name' ok.csv
    [ "$status" -eq 2 ]
    printf 'garbage that is no stream' > bad.tq
    run --separate-stderr tq-cat -t tsv bad.tq -o out.tsv
    [ "$status" -eq 65 ]
    [ ! -e out.tsv ]
}

@test "binary output to a terminal is refused, text is not" {
    command -v script >/dev/null || skip "script(1) is not installed"
    printf '1,2\n' > ok.csv
    tq-cat --from csv ok.csv -o ok.tq
    run script -qec "tq-cat ok.tq" /dev/null
    [ "$status" -eq 2 ]
    [[ "$output" == *"refusing to write a binary stream to a terminal"* ]]
    run script -qec "tq-cat --to npy ok.tq" /dev/null
    [ "$status" -eq 2 ]
    run script -qec "tq-cat -q -t csv --no-header ok.tq" /dev/null
    [ "$status" -eq 0 ]
    [[ "$output" == "1,2"* ]]
}

@test "several files imported under one name each (--as per file)" {
    py - <<'EOF'
import numpy as np
np.save("k.npy", np.arange(6, dtype=np.float32).reshape(3, 2))
np.save("v.npy", -np.arange(6, dtype=np.float32).reshape(3, 2))
np.save("w.npy", np.arange(3, dtype=np.float32))
EOF
    tq-cat --from npy --as k k.npy --as v v.npy > kv.tq
    run tq-cat -t tsv kv.tq
    [ "$output" = "$(printf 'k[0]\tk[1]\tv[0]\tv[1]\n0\t1\t-0\t-1\n2\t3\t-2\t-3\n4\t5\t-4\t-5')" ]
    tq-cat --from npy k.npy v.npy > xx.tq   # one name for both: two batches of x
    run tq-cat -t tsv --no-header xx.tq
    [ "${#lines[@]}" -eq 6 ]
    run --separate-stderr tq-cat --from npy k.npy w.npy
    [ "$status" -eq 65 ]   # the same name must keep its shape
    [[ "$stderr" == *'frame "x" is f32 rank 1, its earlier batches f32 rank 2'* ]]
}

@test "--help names every option with its default, and examples" {
    run tq-cat --help
    [ "$status" -eq 0 ]
    for o in --info --text --head --tail --no-header --to --compress --decompress --name \
             --from --as --batch --dtype --output --force --quiet --verbose --help --version; do
        [[ "$output" == *"$o"* ]] || { echo "missing $o"; false; }
    done
    [[ "$output" == *"Examples:"*"tq-cat --from npy"* ]]
    # and the man page documents the same options
    for o in info text head tail no-header to compress decompress name from as batch dtype; do
        pat="\\-\\-${o//-/\\-}"   # troff writes --no-header as \-\-no\-header
        grep -qF -e "$pat" "$ROOT_DIR/man/tq-cat.1" || { echo "man page misses $pat"; false; }
    done
}


# endless.py [EXTRA]: batches of key (str) and emb (f32 [5, 2]) for ever, with
# a frame "other" between batches when EXTRA is given; stops at a closed pipe.
write_endless() {
    cat > endless.py <<'PY'
import sys, numpy as np, tqstream as tq
out, b = sys.stdout.buffer, 0
try:
    while True:
        out.write(tq.frame("key", "str", [5], tq.str_payload(["r%d" % (5 * b + i) for i in range(5)])))
        out.write(tq.array_frame("emb", np.arange(10 * b, 10 * b + 10, dtype=np.float32).reshape(5, 2)))
        if len(sys.argv) > 1:
            out.write(tq.array_frame("other", np.array([b], dtype=np.int64)))
        out.flush()
        b += 1
except (BrokenPipeError, OSError):
    sys.stderr.close()
PY
}

@test "--head with --name stops reading once its tables are full: a stream that never ends" {
    write_endless
    # timeout: a tq-cat that read to the end would hang; it must fail instead
    run --separate-stderr timeout 20 sh -c "$PY endless.py | tq-cat -t tsv --head 7 --name key,emb"
    [ "$status" -eq 0 ]
    [ "$output" = "$(printf 'key\temb[0]\temb[1]'; for i in 0 1 2 3 4 5 6; do printf '\nr%d\t%d\t%d' $i $((2 * i)) $((2 * i + 1)); done)" ]
    # frames of other names between the batches: never printed, never waited for
    run --separate-stderr timeout 20 sh -c "$PY endless.py x | tq-cat -t jsonl --head 2 --name emb"
    [ "$status" -eq 0 ]
    [ "$output" = "$(printf '{"emb":[0,1]}\n{"emb":[2,3]}')" ]
    # --head 0: the header, then nothing
    run --separate-stderr timeout 20 sh -c "$PY endless.py | tq-cat -t csv --head 0 --name emb"
    [ "$status" -eq 0 ]
    [ "$output" = "emb[0],emb[1]" ]
}

@test "--head without --name reads on: a later frame of another name makes a table of its own" {
    # "other" comes after 4 batches: --head 1 must still print its table
    py - <<'EOF'
from ref import *
fr = []
for b in range(4):
    fr.append(tq.frame("key", "str", [5], tq.str_payload(["r%d" % (5 * b + i) for i in range(5)])))
    fr.append(tq.array_frame("emb", np.full((5, 2), b, dtype=np.float32)))
fr.append(tq.array_frame("other", np.array([7], dtype=np.int64)))
open("s.tq", "wb").write(stream(fr))
EOF
    run tq-cat -t tsv --head 1 s.tq
    [ "$output" = "$(printf 'key\temb[0]\temb[1]\nr0\t0\t0\n\nother\n7')" ]
    # with --name key,emb, "other" cannot print: the same first table, read or not
    run tq-cat -t tsv --head 1 --name key,emb s.tq
    [ "$output" = "$(printf 'key\temb[0]\temb[1]\nr0\t0\t0')" ]
}

@test "default frame of --to npy: the one tensor, said under -v; several: an error naming them" {
    py - <<'EOF'
from ref import *
x = np.arange(12, dtype=np.float32).reshape(6, 2)
open("one.tq", "wb").write(stream([tq.array_frame("x", x[:3]), tq.array_frame("x", x[3:])]))
open("two.tq", "wb").write(stream([tq.array_frame("a", x), tq.array_frame("b", x)]))
EOF
    run --separate-stderr tq-cat --to npy -v -o x.npy one.tq
    [ "$status" -eq 0 ]
    [[ "$stderr" == *'tq-cat: tensor to write: frame "x" (the only tensor frame)'* ]]
    py -c 'import numpy as np; assert (np.load("x.npy") == np.arange(12, dtype=np.float32).reshape(6, 2)).all()'
    run --separate-stderr tq-cat --to npy -o y.npy two.tq
    [ "$status" -eq 2 ] && [ "${#stderr_lines[@]}" -eq 1 ] && [ ! -e y.npy ]
    [ "$stderr" = 'tq-cat: error: more than one frame could be the tensor to write ("a", "b"): name one with --name' ]
}

# tq-cat.1 (NaN and infinities): faithful, never refused for being NaN: a
# frame's NaN payloads pass byte for byte, text reads every spelling back to
# the IEEE value, a number beyond f32 is an infinity of its sign, and an
# integer dtype refuses nan as it refuses 1.5.
@test "NaN and infinities: passed byte for byte, read from text in every spelling, refused only by integer dtypes" {
    py - <<'EOF2'
from ref import *
a = np.array([[1, np.nan], [np.inf, -np.inf]], np.float32)
a.view(np.uint32)[0, 1] = 0xffc01234                     # a negative NaN with a payload
open("n.tq", "wb").write(tq.array_frame("emb", a))
open("n.csv", "w").write("nan,NaN\ninf,-inf\nInfinity,-Infinity\n1e300,-1e300\n")
EOF2
    tq-cat n.tq | cmp - n.tq
    tq-cat --to npy -o n.npy n.tq
    tq-cat --from csv n.csv > c.tq
    py - <<'EOF2'
from ref import *
same(np.load("n.npy"), arrays("n.tq", "emb"))
inf = np.float32(np.inf)
same(arrays("c.tq", "x"), np.array([[np.nan, np.nan], [inf, -inf], [inf, -inf], [inf, -inf]], np.float32),
     nan_payload=False)
EOF2
    printf '1,nan\n' > i.csv
    run --separate-stderr tq-cat --from csv --dtype i32 -o i.tq i.csv
    [ "$status" -eq 65 ] && [ ! -e i.tq ]
    [ "$stderr" = "tq-cat: error: i.csv: line 1: column 2: not an integer: 'nan'" ]
}

@test "--from csv and tsv refuse binary data (a NUL byte) with 65, where they once read a header and no row" {
    cd "$BATS_TEST_TMPDIR"
    printf 'a\n1\n3\0\n' > nul.csv
    printf '1\t2\n' > ok.tsv
    for fmt in csv tsv; do
        run --separate-stderr tq-cat --from $fmt -o out.tq nul.csv
        [ "$status" -eq 65 ] && [ ! -e out.tq ] || fail "$fmt: status $status: $stderr"
        # byte 5: the second byte of the third line, counted from 0
        [ "$stderr" = "tq-cat: error: nul.csv: binary data (a NUL byte at byte 5), not text" ] || fail "$stderr"
        run --separate-stderr tq-cat --from $fmt -o out.tq "$TQ_BIN/tq-cat"
        [ "$status" -eq 65 ] && [[ "$stderr" == *"binary data (a NUL byte at byte "*"), not text" ]] || fail "$fmt: $stderr"
    done
    # text without a NUL still reads
    tq-cat --from tsv ok.tsv | tq-cat -t tsv --no-header > back.tsv
    cmp back.tsv ok.tsv
}
