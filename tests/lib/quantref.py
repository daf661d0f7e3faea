"""quantref.py: an independent NumPy implementation of tq-quantize's codes, from
their definitions (ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref in
ggml-quants.c, sentence-transformers' quantize_embeddings, numpy.packbits,
IEEE 754 rounding), for the tests. Shares no code with libtq; every operation
is one float32 operation, as the C definitions make them.

  quantref.py make OUT SEED N D [BATCH [SCALE]]   vectors "emb" (+ "key", "note")
  quantref.py check CODE IN OUT [RANGES]          OUT is IN quantized: same bytes
  quantref.py bounds CODE IN DEQ [RANGES]         DEQ (dequantized) within the
                                                  bounds of man/tq-quantize.1
  quantref.py decode IN OUT                       OUT is IN with every frame of codes
                                                  replaced by its values (f32), as the
                                                  definitions decode them, side frames
                                                  dropped: what tq-quantize --to f32 writes
  quantref.py peers                               this reference = gguf.quants and
                                                  sentence-transformers (skips: 77)
"""
import os
import sys

import numpy as np

import tqstream as t

F32 = np.float32


def f16_bits(x):
    """IEEE binary16 of float32 x, round to nearest even (NumPy's cast does it)."""
    return np.asarray(x, F32).astype(np.float16).view(np.uint16)


def bf16_bits(x):
    """The upper half of the float32 bits, rounded to nearest even."""
    u = np.asarray(x, F32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def int8_row(x):
    """Symmetric per row: scale = max|x| / 127, q = x / scale, half to even."""
    x = np.asarray(x, F32)
    s = (np.abs(x).max(axis=1) / F32(127)).astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.rint(x / s[:, None])
    v = np.where(s[:, None] == 0, F32(0), v)
    return np.clip(v, -127, 127).astype(np.int8), s


def ranges_of(x):
    x = np.asarray(x, F32)
    return np.vstack((x.min(axis=0), x.max(axis=0))).astype(F32)


def range_codes(x, ranges, signed):
    """sentence-transformers: floor((x - start) / step) clipped to 0..255,
    step = (max - min) / 255 (1 where 0); int8 is that minus 128."""
    starts = ranges[0].astype(F32)
    steps = ((ranges[1].astype(F32) - starts) / F32(255)).astype(F32)
    steps = np.where(steps == 0, F32(1), steps)
    q = np.clip(np.floor((np.asarray(x, F32) - starts) / steps), 0, 255)
    return (q - 128).astype(np.int8) if signed else q.astype(np.uint8)


def roundf(v):
    """C roundf: half away from zero (a - floor(a) is exact in float32)."""
    a = np.abs(v)
    f = np.floor(a)
    return np.sign(v) * (f + (a - f >= F32(0.5)))


def q8_0(x):
    b = np.asarray(x, F32).reshape(-1, 32)
    d = (np.abs(b).max(axis=1) / F32(127)).astype(F32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, F32(1) / d, F32(0)).astype(F32)
    q = roundf((b * idv[:, None]).astype(F32)).astype(np.int8)
    out = np.concatenate([f16_bits(d)[:, None].view(np.uint8), q.view(np.uint8)], axis=1)
    return out.reshape(-1)


def q4_0(x):
    b = np.asarray(x, F32).reshape(-1, 32)
    i = np.abs(b).argmax(axis=1)  # the first of equal magnitudes, as `amax < fabsf(v)`
    mx = b[np.arange(len(b)), i]
    d = (mx / F32(-8)).astype(F32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, F32(1) / d, F32(0)).astype(F32)
    v = ((b * idv[:, None]).astype(F32) + F32(8.5)).astype(F32)
    q = np.minimum(15, np.trunc(v).astype(np.int8)).astype(np.uint8)
    qs = q[:, :16] | (q[:, 16:] << 4)
    out = np.concatenate([f16_bits(d)[:, None].view(np.uint8), qs], axis=1)
    return out.reshape(-1)


def q2(x):
    """tq-quantize(1)'s q2, from its definition: per block of 32, m = f16(min),
    d = f16((max - m) / 3), q = rint((x - m) / d) (half to even) clipped to
    0..3 (0 where d is 0); value j at bits 2 (j // 8) of byte 4 + j % 8."""
    b = np.asarray(x, F32).reshape(-1, 32)
    mh = b.min(axis=1).astype(np.float16)
    m = mh.astype(F32)
    dh = ((b.max(axis=1) - m) / F32(3)).astype(F32).astype(np.float16)
    d = dh.astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d[:, None] > 0, np.rint((b - m[:, None]).astype(F32) / d[:, None]), 0)
    q = np.clip(q, 0, 3).astype(np.uint8)
    packed = q[:, 0:8] | (q[:, 8:16] << 2) | (q[:, 16:24] << 4) | (q[:, 24:32] << 6)
    out = np.concatenate([dh[:, None].view(np.uint8), mh[:, None].view(np.uint8), packed], axis=1)
    return out.reshape(-1)


def bits(x):
    return np.packbits(np.asarray(x) > 0, axis=-1)


def codes(code, x, ranges=None):
    """(codes bytes, side frames {name suffix: array}) of rows x for CODE."""
    if code == "f16":
        return f16_bits(x).tobytes(), {}
    if code == "bf16":
        return bf16_bits(x).tobytes(), {}
    if code == "int8":
        q, s = int8_row(x)
        return q.tobytes(), {"_scale": s}
    if code in ("uint8", "int8r"):
        return range_codes(x, ranges, code == "int8r").tobytes(), {}
    if code == "q8_0":
        return q8_0(x).tobytes(), {}
    if code == "q4_0":
        return q4_0(x).tobytes(), {}
    if code == "bit":
        return bits(x).tobytes(), {}
    if code == "q2":
        return q2(x).tobytes(), {}
    raise SystemExit("unknown code " + code)


def load(path):
    return t.read(open(path, "rb").read())


def make(out, seed, n, d, batch=None, scale=1.0):
    rng = np.random.default_rng(int(seed))
    n, d = int(n), int(d)
    batch = int(batch) if batch else n
    x = (rng.standard_normal((n, d)) * float(scale)).astype(F32)
    # a zero row, a row of one sign and exact ties, the corners of each code
    if n > 3:
        x[1] = 0
        x[2] = np.abs(x[2])
        x[3, : d // 2] = 0.5
    if n > 7 and d >= 32:
        # exact ties, where half-to-even, half-away and floor part ways: int8
        # and q8_0 (scale 2^-5: x / scale = k + 1/2), q4_0 (d = 2^-4: x / d +
        # 8.5 an integer), f16 and bf16 (halfway between neighbours)
        k = np.arange(d, dtype=F32)
        row = (k % 40 - 20 + 0.5) * F32(2.0 ** -5)
        row[::32] = F32(127 * 2.0 ** -5)
        x[4] = row
        row = (k % 16 - 8 + 0.5) * F32(2.0 ** -4)
        row[::32] = F32(-8 * 2.0 ** -4)
        x[5] = row
        x[6] = (1 + (2 * (k % 64) + 1) * F32(2.0 ** -11)) * F32(2.0 ** -3)
        x[7] = (1 + (2 * (k % 64) + 1) * F32(2.0 ** -8)) * F32(-2.0 ** 3)
    parts = [t.array_frame("note", np.arange(3, dtype=np.int64))]
    for i in range(0, n, batch):
        keys = ["row%d" % j for j in range(i, min(n, i + batch))]
        parts.append(t.frame("key", "str", [len(keys)], t.str_payload(keys)))
        parts.append(t.array_frame("emb", x[i:i + batch], meta={"model": "test"}))
    open(out, "wb").write(b"".join(parts))


def rows_of(frames, name="emb"):
    return np.concatenate([t.to_numpy(f).astype(F32) for f in frames if f["name"] == name])


def check(code, inp, outp, ranges_path=None):
    fin, fout = load(inp), load(outp)
    ranges = None
    if code in ("uint8", "int8r"):
        rf = [f for f in fout if f["name"] == "emb_ranges"]
        assert len(rf) == 1, "one emb_ranges frame, not %d" % len(rf)
        ranges = t.to_numpy(rf[0])
        want = ranges_of(rows_of(load(ranges_path) if ranges_path else fin))
        assert ranges.tobytes() == want.tobytes(), "ranges differ from the calibration min/max"
        fout = [f for f in fout if f["name"] != "emb_ranges"]
    # other frames pass through in order; each emb batch is replaced in place
    others_in = [f for f in fin if f["name"] != "emb"]
    others_out = [f for f in fout if f["name"] not in ("emb", "emb_scale")]
    assert [(f["name"], f["raw"], f["meta"]) for f in others_in] == \
           [(f["name"], f["raw"], f["meta"]) for f in others_out], "pass-through changed"
    bin_ = [f for f in fin if f["name"] == "emb"]
    bout = [f for f in fout if f["name"] == "emb"]
    assert len(bin_) == len(bout), "batches: %d in, %d out" % (len(bin_), len(bout))
    dt = {"int8r": "i8", "int8": "i8", "uint8": "u8"}.get(code, code)
    for k, (a, b) in enumerate(zip(bin_, bout)):
        x = t.to_numpy(a).astype(F32)
        want, side = codes(code, x, ranges)
        assert b["dtype"] == dt and b["dims"] == a["dims"], (b["dtype"], b["dims"])
        assert b["meta"].get("model") == "test", b["meta"]
        if want != b["raw"]:
            got = np.frombuffer(b["raw"], np.uint8)
            ref = np.frombuffer(want, np.uint8)
            bad = np.nonzero(got != ref)[0]
            raise AssertionError("%s batch %d: %d bytes differ, first at %d: %d, want %d"
                                 % (code, k, len(bad), bad[0], got[bad[0]], ref[bad[0]]))
        for suffix, arr in side.items():
            i = fout.index(b)
            assert i > 0 and fout[i - 1]["name"] == "emb" + suffix, "no %s before batch %d" % (suffix, k)
            assert fout[i - 1]["raw"] == arr.astype(F32).tobytes(), suffix + " differs"
    print("ok", code, sum(f["dims"][0] for f in bin_), "rows")


def bounds(code, inp, deqp, ranges_path=None):
    """The error bounds man/tq-quantize.1 states, per value, in float64."""
    fin = load(inp)
    x = rows_of(fin).astype(np.float64)
    y = rows_of(load(deqp)).astype(np.float64)
    assert x.shape == y.shape, (x.shape, y.shape)
    e = np.abs(y - x)
    ax = np.abs(x)
    amax = ax.max(axis=1, keepdims=True)
    if code == "f16":
        # half an ulp: 2^-11 relative for normal halves, 2^-25 absolute below 2^-14
        lim = np.maximum(ax * 2.0 ** -11, 2.0 ** -25)
    elif code == "bf16":
        lim = np.maximum(ax * 2.0 ** -8, 2.0 ** -134)
    elif code == "int8":
        # scale / 2 from the rounding, plus f32 roundings (a few 2^-24 of amax)
        lim = amax / 127 / 2 + amax * 2.0 ** -20
    elif code in ("uint8", "int8r"):
        r = ranges_of(rows_of(load(ranges_path)) if ranges_path else x).astype(np.float64)
        step = (r[1] - r[0]) / 255
        inside = (x >= r[0]) & (x <= r[1])
        # floor: the value lies within one step above its code's value (f32
        # roundings of x - min and of the division: 2^-20 of the range)
        slack = 2.0 ** -20 * (np.abs(r[0]) + np.abs(r[1]))
        d = x - y
        assert np.all(~inside | ((d >= -slack) & (d <= step + slack))), \
            "ranges: %g outside [0, step]" % np.max(np.where(inside, d - step, 0))
        # outside the calibration range the value is clipped to its end
        clip = np.clip(x, r[0], r[1])
        lim = np.where(inside, np.inf, np.abs(x - clip) + step + slack)
    elif code == "q8_0":
        # per block of 32: d = amax / 127, |q d16 - x| <= d/2 + 127 |d16 - d|,
        # |d16 - d| <= 2^-11 d (2^-25 absolute for a subnormal half)
        bmax = ax.reshape(len(x), -1, 32).max(axis=2).repeat(32, axis=1)
        dd = bmax / 127
        lim = dd * (0.5 + 127 * 2.0 ** -11) + 127 * 2.0 ** -25 + bmax * 2.0 ** -20
    elif code == "q4_0":
        # d = max / -8 over 16 steps: one step |d| where +8 d clips to 7 d,
        # half a step elsewhere; and 8 |d16 - d|
        bmax = ax.reshape(len(x), -1, 32).max(axis=2).repeat(32, axis=1)
        dd = bmax / 8
        lim = dd * (1 + 8 * 2.0 ** -11) + 8 * 2.0 ** -25 + bmax * 2.0 ** -20
    elif code == "q2":
        # per block: d = (max - min) / 3, half a step d / 2; the f16 offset
        # within 2^-11 |min| (2^-25 below 2^-14), the f16 step's 3 |d16 - d|
        # where the largest value clips to 3, and f32 roundings
        bl = x.reshape(len(x), -1, 32)
        bmin, bmax = bl.min(axis=2), bl.max(axis=2)
        dd = ((bmax - bmin) / 3).repeat(32, axis=1)
        am = np.maximum(np.abs(bmin), np.abs(bmax)).repeat(32, axis=1)
        lim = dd / 2 + np.abs(bmin).repeat(32, axis=1) * 2.0 ** -11 + 2.0 ** -25 + \
            3 * (dd * 2.0 ** -11 + 2.0 ** -25) + am * 2.0 ** -20
    elif code == "bit":
        assert np.all(y == np.where(x > 0, 1.0, -1.0)), "bit: not the signs as +1 / -1"
        print("ok bounds", code)
        return
    else:
        raise SystemExit("unknown code " + code)
    worst = (e - lim).max()
    assert worst <= 0, "%s: error over the bound by %g" % (code, worst)
    print("ok bounds", code, "max error %.3g" % e.max())


def st_quantize():
    """sentence-transformers' quantize_embeddings, loaded from its file: the
    package's __init__ needs a newer PyTorch than Debian's."""
    import importlib.util
    import types
    spec = importlib.util.find_spec("sentence_transformers")
    if spec is None:
        return None
    base = os.path.join(os.path.dirname(spec.origin), "util")
    pkg = types.ModuleType("stq")
    pkg.__path__ = [base]
    sys.modules["stq"] = pkg
    for mod in ("tensor", "quantization"):
        s = importlib.util.spec_from_file_location("stq." + mod, os.path.join(base, mod + ".py"))
        m = importlib.util.module_from_spec(s)
        sys.modules["stq." + mod] = m
        s.loader.exec_module(m)
    return sys.modules["stq.quantization"].quantize_embeddings


def values(dtype, raw, n, d, scale=None, ranges=None):
    """Rows [n, d] float32 of codes: ggml's dequantize_row_q8_0 / _q4_0 (q d in
    float32), q s for int8 with its scales, min + q step in float64 then
    float32 for the ranges codes (step in float32, 1 where 0), +1 / -1 for bits,
    the exact widening of f16 and bf16."""
    b = np.frombuffer(raw, np.uint8)
    if dtype == "f16":
        return b.view(np.float16).astype(F32).reshape(n, d)
    if dtype == "bf16":
        return (b.view(np.uint16).astype(np.uint32) << 16).view(F32).reshape(n, d)
    if dtype in ("i8", "u8") and scale is not None and dtype == "i8":
        return (b.view(np.int8).astype(F32).reshape(n, d) * scale[:, None]).astype(F32)
    if dtype in ("i8", "u8"):
        q = b.view(np.int8).astype(np.float64) + 128 if dtype == "i8" else b.astype(np.float64)
        starts = ranges[0].astype(F32)
        steps = ((ranges[1].astype(F32) - starts) / F32(255)).astype(F32)
        steps = np.where(steps == 0, F32(1), steps)
        return (q.reshape(n, d) * steps.astype(np.float64) + starts.astype(np.float64)).astype(F32)
    if dtype == "q8_0":
        blk = b.reshape(-1, 34)
        dd = blk[:, :2].copy().view(np.float16).astype(F32)
        return (blk[:, 2:].view(np.int8).astype(F32) * dd).astype(F32).reshape(n, d)
    if dtype == "q4_0":
        blk = b.reshape(-1, 18)
        dd = blk[:, :2].copy().view(np.float16).astype(F32)
        v = np.concatenate([(blk[:, 2:] & 15).astype(F32) - 8, (blk[:, 2:] >> 4).astype(F32) - 8],
                           axis=1)
        return (v * dd).astype(F32).reshape(n, d)
    if dtype == "q2":
        blk = b.reshape(-1, 12)
        dd = blk[:, 0:2].copy().view(np.float16).astype(F32)
        mm = blk[:, 2:4].copy().view(np.float16).astype(F32)
        v = np.concatenate([(blk[:, 4:] >> s) & 3 for s in (0, 2, 4, 6)], axis=1).astype(F32)
        return ((v * dd).astype(F32) + mm).astype(F32).reshape(n, d)
    if dtype == "bit":
        v = np.unpackbits(b.reshape(n, -1), axis=1)[:, :d]
        return np.where(v == 1, F32(1), F32(-1))
    raise SystemExit("not a code: " + dtype)


def decode(inp, outp):
    fr = load(inp)
    names = {f["name"] for f in fr if f["dtype"] in ("f16", "bf16", "i8", "u8", "q8_0", "q4_0", "bit",
                                                      "q2")
             and len(f["dims"]) == 2}
    scale, ranges, out = {}, {}, []
    for f in fr:
        stem = f["name"].rsplit("_", 1)[0]
        if f["name"].endswith("_scale") and stem in names:
            scale[stem] = t.to_numpy(f)
        elif f["name"].endswith("_ranges") and stem in names:
            ranges[stem] = t.to_numpy(f)
        elif f["name"] in names and len(f["dims"]) == 2:
            n, d = f["dims"]
            y = values(f["dtype"], f["raw"], n, d, scale.pop(f["name"], None), ranges.get(f["name"]))
            meta = {k: v for k, v in f["meta"].items() if k != "quant"}
            out.append(t.array_frame(f["name"], y, meta=meta))
        else:
            out.append(t.frame(f["name"], f["dtype"], f["dims"], f["raw"], meta=f["meta"]))
    open(outp, "wb").write(b"".join(out))


def peers():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2000, 384)).astype(F32)
    x[::7] *= F32(1e-3)
    x[5, :] = 0
    x[8, :32] = F32(0.25)  # a block of one value: ties everywhere
    x[9, :32] = np.arange(-16, 16, dtype=F32)  # halves at every step of q4_0
    tried = 0
    try:
        import gguf
        from gguf import quants
        tried += 1
        for name, mine in (("Q8_0", q8_0), ("Q4_0", q4_0)):
            qt = getattr(gguf.GGMLQuantizationType, name)
            theirs = quants.quantize(x, qt).reshape(-1)
            assert theirs.tobytes() == mine(x).tobytes(), "gguf %s differs" % name
        print("ok gguf", gguf.__name__, "q8_0 q4_0")
    except ImportError:
        print("gguf not installed", file=sys.stderr)
    qe = None
    try:
        qe = st_quantize()
    except ImportError as exc:
        print("sentence-transformers not usable:", exc, file=sys.stderr)
    if qe is not None:
        tried += 1
        calib = x[:500]
        r = ranges_of(calib)
        for prec, signed in (("uint8", False), ("int8", True)):
            a = qe(x, prec, calibration_embeddings=calib)
            b = qe(x, prec, ranges=r)
            mine = range_codes(x, r, signed)
            assert a.tobytes() == mine.tobytes() and b.tobytes() == mine.tobytes(), prec
        assert qe(x, "ubinary").tobytes() == bits(x).tobytes(), "ubinary"
        print("ok sentence-transformers uint8 int8 ubinary")
    try:
        import torch
        got = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        assert got.tobytes() == bf16_bits(x).tobytes(), "torch bfloat16 differs"
        print("ok torch bf16")
    except ImportError:
        pass
    if not tried:
        sys.exit(77)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"make": make, "check": check, "bounds": bounds, "decode": decode, "peers": peers}[cmd](*args)
