#!/usr/bin/env bats
# tq-attend: against PyTorch (Debian's python3-torch) in float64 at realistic
# sizes, every mask kind, projections, consensus and weights; the alignment of
# "out" with pass-through frames; errors; and peak memory linear in n.
# Tolerance: max |tq - torch64| <= 1e-4 relative to max |torch64|: f32
# attention over a few thousand keys keeps ~1e-6 (the op suite holds the
# kernel to NMSE 1e-8 against float64); a wrong mask or scale is off by 1e-1.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    "$PY" -c 'import torch' 2>/dev/null || skip "python3-torch is not installed (make deps-test installs it)"
    cd "$BATS_TEST_TMPDIR"
    cat > ref.py <<'EOF'
import sys, numpy as np, torch
import tqstream as tq
torch.set_default_dtype(torch.float64)

def frames(path):
    out = {}
    for f in tq.read(open(path, "rb").read()):
        out.setdefault(f["name"], []).append(tq.to_numpy(f))
    return {k: np.concatenate(v) if v[0].ndim else v for k, v in out.items()}

def attention(q, k, v, heads, causal=False, key_len=None, qg=None, kg=None, scale=None):
    """softmax(q k^T * scale + mask) v per head, torch float64; [B, L, d] in.
    Fully masked queries give 0; received as the man page defines it."""
    q, k, v = (torch.tensor(x, dtype=torch.float64) for x in (q, k, v))
    B, Lq, d = q.shape; Lk = k.shape[1]; dh = d // heads; dv = v.shape[2] // heads
    qh = q.view(B, Lq, heads, dh).transpose(1, 2)
    kh = k.view(B, Lk, heads, dh).transpose(1, 2)
    vh = v.view(B, Lk, heads, dv).transpose(1, 2)
    s = qh @ kh.transpose(-1, -2) * (scale if scale else dh ** -0.5)
    mask = torch.zeros(B, 1, Lq, Lk, dtype=torch.bool)
    if causal:
        mask |= torch.triu(torch.ones(Lq, Lk, dtype=torch.bool), 1)
    if key_len is not None:
        mask |= (torch.arange(Lk)[None, :] >= torch.tensor(key_len)[:, None])[:, None, None, :]
    if qg is not None:
        mask |= (torch.tensor(qg)[:, :, None] != torch.tensor(kg)[:, None, :])[:, None]
    s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    out = (p @ vh).transpose(1, 2).reshape(B, Lq, heads * dv)
    off = p * (1 - torch.eye(Lq, Lk))
    return out.numpy(), off.sum(2).mean(1).numpy(), p.numpy()

def close(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    assert err <= 1e-4, "%s: max relative error %.3g" % (what, err)
    print("%s: max relative error %.2g" % (what, err))
EOF
}

@test "self-attention, causal, groups, key mask, consensus and weights agree with PyTorch; out stays beside its keys" {
    py - <<'EOF'
import numpy as np, tqstream as tq
rng = np.random.default_rng(1)
n, d = 700, 96
x = rng.standard_normal((n, d)).astype(np.float32)
g = np.repeat(np.arange(7), 100).astype(np.int32)      # 7 groups of 100 rows
m = (rng.random(n) > 0.1).astype(np.uint8)              # 10% of keys masked
keys = ["r%d" % i for i in range(n)]
with open("in.tq", "wb") as f:
    for a, b in ((0, 300), (300, 700)):                 # two batches, each after its keys
        f.write(tq.frame("key", "str", [b - a], tq.str_payload(keys[a:b])))
        f.write(tq.array_frame("emb", x[a:b]))
        f.write(tq.array_frame("grp", g[a:b]))
        f.write(tq.array_frame("keep", m[a:b]))
np.save("x.npy", x); np.save("g.npy", g); np.save("m.npy", m)
EOF
    run tq-attend --self --heads 4 --causal --group grp --key-mask keep --consensus --weights-out -o out.tq < in.tq
    assert_success
    py - <<'EOF'
import numpy as np, tqstream as tq
from ref import attention, close
x, g, m = np.load("x.npy"), np.load("g.npy"), np.load("m.npy")
fr = tq.read(open("out.tq", "rb").read())
names = [f["name"] for f in fr]
# out (and consensus) take the place of each emb batch, right after its key
assert names == ["key", "out", "consensus", "grp", "keep"] * 2 + ["attn"], names
for i in (0, 5):
    assert fr[i + 1]["dims"][0] == fr[i]["dims"][0] == fr[i + 2]["dims"][0]
out = np.concatenate([tq.to_numpy(f) for f in fr if f["name"] == "out"])
cons = np.concatenate([tq.to_numpy(f) for f in fr if f["name"] == "consensus"])
w = tq.to_numpy(fr[-1])
kg = np.where(m == 0, -1, g)
ro, rr, rw = attention(x[None], x[None], x[None], 4, causal=True, qg=g[None], kg=kg[None])
close(out, ro[0], "out"); close(cons, rr[0], "consensus"); close(w, rw, "weights")
assert (out[0] == 0).all() == (m[0] == 0)   # row 0 sees only key 0
EOF
}

@test "cross-attention from --kv, rank 3 with --key-len and --weights projections agree with PyTorch" {
    py - <<'EOF'
import numpy as np, tqstream as tq
rng = np.random.default_rng(2)
B, Lq, Lk, dq, dk, dv, D, Dv, Do = 3, 150, 260, 40, 24, 20, 64, 32, 16
q = rng.standard_normal((B, Lq, dq)).astype(np.float32)
k = rng.standard_normal((B, Lk, dk)).astype(np.float32)
v = rng.standard_normal((B, Lk, dv)).astype(np.float32)
W = dict(wq=(D, dq), wk=(D, dk), wv=(Dv, dv), wo=(Do, Dv))
ws = {n: (rng.standard_normal(s) / np.sqrt(s[1])).astype(np.float32) for n, s in W.items()}
bs = {"b" + n[1]: rng.standard_normal(W[n][0]).astype(np.float32) for n in ("wq", "wk", "wv")}
with open("w.tq", "wb") as f:
    for n, a in list(ws.items()) + list(bs.items()):     # no bo: optional
        f.write(tq.array_frame(n, a))
with open("kv.tq", "wb") as f:
    f.write(tq.array_frame("k", k)); f.write(tq.array_frame("v", v))
with open("q.tq", "wb") as f:
    f.write(tq.array_frame("q", q[:2])); f.write(tq.array_frame("q", q[2:]))
    f.write(tq.array_frame("len", np.array([260, 0, 100], np.int64)))
np.savez("ref.npz", q=q, k=k, v=v, **ws, **bs)
EOF
    run tq-attend --q q --kv kv.tq --weights w.tq --heads 4 --key-len len -o out.tq < q.tq
    assert_success
    py - <<'EOF'
import numpy as np, tqstream as tq
from ref import attention, close
r = np.load("ref.npz")
fr = tq.read(open("out.tq", "rb").read())
assert [f["name"] for f in fr] == ["out", "out", "len"]
out = np.concatenate([tq.to_numpy(f) for f in fr if f["name"] == "out"])
f64 = lambda a: a.astype(np.float64)
Q = f64(r["q"]) @ f64(r["wq"]).T + r["bq"]; K = f64(r["k"]) @ f64(r["wk"]).T + r["bk"]
V = f64(r["v"]) @ f64(r["wv"]).T + r["bv"]
ro, _, _ = attention(Q, K, V, 4, key_len=[260, 0, 100])
close(out, ro @ f64(r["wo"]).T, "out")
# sequence 1 has no keys: attention gives 0, the output projection's bias (none) too
assert (out[1] == 0).all()
EOF
}

@test "errors: one line, sysexits status" {
    py -c 'import numpy as np, tqstream as tq, sys; sys.stdout.buffer.write(tq.array_frame("emb", np.ones((4, 6), np.float32)))' > x.tq
    run -2 tq-attend --heads 2 < x.tq
    assert_output --regexp "^tq-attend: error: give exactly one of --self and --kv FILE"
    run -2 tq-attend --self --heads 4 -o o.tq < x.tq
    assert_output "tq-attend: error: 4 heads do not divide the widths 6 and 6"
    run -65 tq-attend --self --q nope -o o.tq < x.tq
    assert_output 'tq-attend: error: no frame "nope" (queries) in the input'
    run -66 tq-attend --kv missing.tq -o o.tq < x.tq
    assert_output --regexp "^tq-attend: error: missing.tq: .*"
    run -65 tq-attend --self --group g -o o.tq < x.tq
    assert_output 'tq-attend: error: no frame "g" in the input'
    head -c 100 x.tq > cut.tq
    run -65 tq-attend --self -o o.tq < cut.tq
    assert_equal "${#lines[@]}" 1
    [ ! -e o.tq ]
}

@test "peak memory stays linear: n = 16384, d = 512, 8 heads under 2.5x inputs + outputs" {
    needs_peak_rss
    py -c '
import numpy as np, sys, tqstream as tq
x = np.random.default_rng(3).standard_normal((16384, 512)).astype(np.float32)
sys.stdout.buffer.write(tq.array_frame("emb", x))' > big.tq
    # causal halves the work; the memory behaviour is the same
    run /usr/bin/time -f "%M" tq-attend --self --heads 8 --causal -o big-out.tq < big.tq
    assert_success
    kib=${lines[-1]}
    io=$(( ($(stat -c %s big.tq) + $(stat -c %s big-out.tq)) / 1024 ))
    echo "max RSS ${kib} KiB, inputs + outputs ${io} KiB"
    [ "$kib" -lt $(( io * 5 / 2 )) ]
}

@test "default frames: emb, else the one rank 2 or 3 float frame, else an error naming them" {
    py -c '
import numpy as np, tqstream as tq
x = np.random.default_rng(5).standard_normal((6, 8)).astype(np.float32)
np.save("q.npy", x)
open("kv.tq", "wb").write(tq.array_frame("mem", x[::-1].copy()))'
    # tq-cat --from npy names the frame x: taken without --q, and said under -v
    run --separate-stderr sh -c 'tq-cat --from npy q.npy | tq-attend --self --heads 2 -v -o out.tq'
    assert_success
    [[ "$stderr" == *'tq-attend: queries: frame "x" (the only rank 2 or 3 float or code frame; none is named "emb")'* ]]
    # --kv FILE of one frame: K = V = that frame
    run --separate-stderr sh -c 'tq-cat --from npy q.npy | tq-attend --kv kv.tq -v -o out2.tq'
    assert_success
    [[ "$stderr" == *'keys: frame "mem" (the only rank 2 or 3 float or code frame; none is named "k")'* ]]
    [[ "$stderr" == *'values: frame "mem" (the only rank 2 or 3 float or code frame; none is named "v")'* ]]
    run py -c '
import numpy as np
from ref import frames, attention
x = np.load("q.npy")[None].astype(np.float64)
for out, k, h in (("out.tq", x, 2), ("out2.tq", x[:, ::-1].copy(), 1)):
    got = frames(out)["out"][None]
    want = attention(x, k, k, h)[0]
    assert abs(got - want).max() <= 1e-4 * abs(want).max(), out
print("ok")'
    assert_output "ok"
    # the default name wins over the only-one rule; several without it: an error
    run --separate-stderr sh -c 'tq-cat --from npy --as emb --as y q.npy q.npy | tq-attend --self -v -o o.tq'
    assert_success
    [[ "$stderr" == *'queries: frame "emb" (its default name)'* ]]
    run --separate-stderr sh -c 'tq-cat --from npy --as a --as b q.npy q.npy | tq-attend --self -o o.tq'
    [ "$status" -eq 2 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [ "$stderr" = 'tq-attend: error: more than one frame could be the queries ("a", "b", all rank 2 or 3 float or code) and none is named "emb": name one with --q' ]
}

@test "--kv: frames of one name on both sides each come from their own input; widths must agree; -v says what came from where" {
    # what tq-embed writes on both sides: "key" and "emb"
    printf 'the cat sat\n' > q.txt
    printf 'a dog ran\nthe cat sat on the mat\nbirds fly\n' > kv.txt
    tq-embed -m hash:384 q.txt > q.tq
    tq-embed -m hash:384 kv.txt > kv.tq
    tq-embed -m hash:8 q.txt > q8.tq
    run --separate-stderr tq-attend -v --kv kv.tq -o out.tq < q.tq
    assert_success
    [[ "$stderr" == *'tq-attend: queries: frame "emb" [1 x 384] from standard input; keys and values: frame "emb" [3 x 384] from kv.tq'* ]]
    [[ "$stderr" == *'tq-attend: 1 sequence, 1 queries, 3 keys, 1 heads'* ]]
    run py -c '
import numpy as np
from ref import frames, attention
q = frames("q.tq")["emb"][None].astype(np.float64)
kv = frames("kv.tq")["emb"][None].astype(np.float64)
got = frames("out.tq")
assert got["out"].shape == (1, 384), got["out"].shape
want = attention(q, kv, kv, 1)[0][0]
assert abs(got["out"] - want).max() <= 1e-4 * abs(want).max(), abs(got["out"] - want).max()
assert got["key"].tolist() == [0], got["key"]   # the query side passes through
print("ok")'
    assert_output "ok"
    # --self: all three from standard input, said once
    run --separate-stderr tq-attend -v --self -o self.tq < kv.tq
    assert_success
    [[ "$stderr" == *'tq-attend: queries, keys and values: frame "emb" [3 x 384] from standard input'* ]]
    # queries of 8 values against keys of 384: one line naming both, exit 65, no output
    run --separate-stderr tq-attend --kv kv.tq -o bad.tq < q8.tq
    [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [ "$stderr" = 'tq-attend: error: queries and keys differ in width: "emb" from standard input has 8 values a row, "emb" from kv.tq has 384' ]
    [ ! -e bad.tq ]
}

# refuses CODE MESSAGE ARGS...: tq-attend ARGS (input on standard input) fails
# with CODE and the one line MESSAGE, and writes no -o file.
refuses() {
    local code=$1 msg=$2
    shift 2
    rm -f o.tq
    run --separate-stderr tq-attend "$@" -o o.tq
    [ "$status" -eq "$code" ] || fail "status $status (want $code): $stderr"
    [ "$stderr" = "tq-attend: error: $msg" ] || fail "got: $stderr"
    [ -z "$output" ] && [ ! -e o.tq ] || fail "wrote something"
}

# tq-attend.1 (NaN AND INFINITIES): refused, exit 65, one line naming the
# input, frame, row and value, nothing written, on every device alike. Issue
# 34: the three rows of vectors.csv with a NaN in the second gave NaN for the
# first row and 0 for the others under --causal, 0 for all without it, and a
# NaN in one group changed another group's rows.
@test "NaN and infinities: refused with the input, frame, row and value named, exit 65, on every device" {
    py - <<'EOF2'
import numpy as np, tqstream as tq
x = np.array([[1, 2, -4], [0.5, 3, 1], [-1, 2, 8]], np.float32)
g = np.array([0, 0, 1], np.int64)
def w(name, *fr): open(name, "wb").write(b"".join(fr))
w("ok.tq", tq.array_frame("emb", x), tq.array_frame("g", g))
xn = x.copy(); xn[1, 1] = np.nan
w("nan.tq", tq.array_frame("emb", xn), tq.array_frame("g", g))
xi = x.copy(); xi[2, 0] = -np.inf
w("inf.tq", tq.array_frame("emb", xi[:1]), tq.array_frame("emb", xi[1:]))
x64 = x.astype(np.float64); x64[1, 2] = 1e300                    # no f32 holds it
w("big64.tq", tq.array_frame("emb", x64))
xh = x.astype(np.float16); xh[0, 2] = np.inf
w("inf16.tq", tq.array_frame("emb", xh))
s3 = np.stack([x, x]); s3[1, 2, 1] = np.nan                     # sequence 1, row 2
w("seq.tq", tq.array_frame("q", s3))
w("kv.tq", tq.array_frame("k", x), tq.array_frame("v", xn))
eye = np.eye(3, dtype=np.float32); bo = np.zeros(3, np.float32)
w("w-ok.tq", *(tq.array_frame(n, eye) for n in ("wq", "wk", "wv", "wo")), tq.array_frame("bo", bo))
bo[2] = np.nan
w("w.tq", *(tq.array_frame(n, eye) for n in ("wq", "wk", "wv", "wo")), tq.array_frame("bo", bo))
EOF2
    nan='frame 0 "emb" of standard input, row 1: value 1 is NaN; attention has no answer for it'
    all_devices
    for dev in $devices; do
        # the issue's cases: --causal, without it, with groups
        refuses 65 "$nan" --device "$dev" --self --causal < nan.tq
        refuses 65 "$nan" --device "$dev" --self < nan.tq
        refuses 65 "$nan" --device "$dev" --self --group g --heads 3 < nan.tq
        # the same input without the NaN runs (so it is the NaN that is refused)
        run tq-attend --device "$dev" --self --causal --group g -o ok-"$dev".tq < ok.tq
        assert_success
    done
    # infinities; rows count across batches; f16 converted, f64 beyond f32
    refuses 65 'frame 1 "emb" of standard input, row 2: value 0 is infinite; attention has no answer for it' --self < inf.tq
    refuses 65 'frame 0 "emb" of standard input, row 0: value 2 is infinite; attention has no answer for it' --self < inf16.tq
    refuses 65 'frame 0 "emb" of standard input, row 1: value 2 is 1e+300, beyond the range of f32; attention has no answer for it' --self < big64.tq
    # rank 3: the sequence and its row; keys and values of --kv; the weights
    refuses 65 'frame 0 "q" of standard input, sequence 1, row 2: value 1 is NaN; attention has no answer for it' --self --q q < seq.tq
    refuses 65 'frame 1 "v" of kv.tq, row 1: value 1 is NaN; attention has no answer for it' --kv kv.tq < ok.tq
    refuses 65 'frame 4 "bo" of w.tq: value 2 is NaN; attention has no answer for it' --self --weights w.tq < ok.tq
    # keys and weights without the NaN: accepted
    run tq-attend --kv ok.tq --k emb --v emb -o kv-ok.tq < ok.tq
    assert_success
    run tq-attend --self --weights w-ok.tq -o w-ok-out.tq < ok.tq
    assert_success
}

@test "finite values whose scores would overflow f32 are refused, not answered with zeros" {
    py - <<'EOF2'
import numpy as np, tqstream as tq
def w(name, *fr): open(name, "wb").write(b"".join(fr))
x = np.array([[1e20, 0, 0, 0], [1, 2, 3, 4], [0.5, 0.5, 0, 1]], np.float32)
w("ovf.tq", tq.array_frame("emb", x))
s3 = np.stack([x[[1, 2, 1]], x]).astype(np.float32)             # sequence 1, row 0
w("ovf3.tq", tq.array_frame("q", s3))
v = np.ones((3, 4), np.float32); v[2] = 3e38                      # sums of 3 keys: beyond f32
w("kv.tq", tq.array_frame("k", x[[1, 2, 1]]), tq.array_frame("v", v))
# large but safe: |q| |k| = 1e36 scaled by 1/2 stays within f32
b = np.array([[1e18, 0, 0, 0], [-1e18, 0, 0, 1], [1, 2, 3, 4]], np.float32)
w("big.tq", tq.array_frame("emb", b))
EOF2
    refuses 65 "the scores could overflow f32: query row 0 has norm 1e+20 and key row 0 1e+20, beyond f32's largest value (3.4e38) together; scale the inputs down" --self < ovf.tq
    refuses 65 "the scores could overflow f32: query sequence 1, row 0 has norm 1e+20 and key sequence 1, row 0 1e+20, beyond f32's largest value (3.4e38) together; scale the inputs down" --self --q q < ovf3.tq
    refuses 65 "the outputs could overflow f32: value row 2 has norm 6e+38, over 3 keys beyond f32's largest value (3.4e38); scale the inputs down" --kv kv.tq < ovf.tq
    # the large rows that cannot overflow get the float64 softmax's answer
    run tq-attend --self -o big-out.tq < big.tq
    assert_success
    py - <<'EOF2'
import numpy as np, tqstream as tq
x = tq.to_numpy(tq.read(open("big.tq", "rb").read())[0]).astype(np.float64)
got = tq.to_numpy(tq.read(open("big-out.tq", "rb").read())[0])
s = x @ x.T / 2
p = np.exp(s - s.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
want = p @ x
# rows 0 and 1 see a score of 5e35 against -5e35: one-hot weights, so their
# outputs are those rows, exactly; row 2 (small) within f32 rounding
assert np.isfinite(got).all(), got
assert np.allclose(got, want, rtol=1e-6, atol=1e-6), (got, want)
EOF2
}

@test "--weights of another width: one line naming the weights file and where the inputs came from" {
    py - <<'EOF'
import numpy as np, tqstream as tq
rng = np.random.default_rng(4)
with open("w.tq", "wb") as f:
    for n in ("wq", "wk", "wv", "wo"):
        f.write(tq.array_frame(n, rng.standard_normal((8, 8)).astype(np.float32)))
with open("kv.tq", "wb") as f:
    f.write(tq.array_frame("k", rng.standard_normal((5, 6)).astype(np.float32)))
    f.write(tq.array_frame("v", rng.standard_normal((5, 6)).astype(np.float32)))
open("q.tq", "wb").write(tq.array_frame("emb", rng.standard_normal((3, 6)).astype(np.float32)))
EOF
    run --separate-stderr tq-attend --kv kv.tq --weights w.tq -o out.tq < q.tq
    [ "$status" -eq 65 ] && [ -z "$output" ] && [ ! -e out.tq ]
    [ "$stderr" = "tq-attend: error: --weights w.tq: wq, wk, wv take widths 8, 8, 8; the queries (standard input), keys and values (kv.tq) have 6, 6, 6" ]
    run --separate-stderr tq-attend --self --weights w.tq < q.tq
    [ "$status" -eq 65 ]
    [ "$stderr" = "tq-attend: error: --weights w.tq: wq, wk, wv take widths 8, 8, 8; the queries (standard input), keys and values (standard input) have 6, 6, 6" ]
}
