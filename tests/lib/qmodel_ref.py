"""qmodel_ref.py: quantized scorers (tq-quantize on a tq-train model) against a
NumPy reference written from man/tq-score.1 (MODEL FILES, quantized
weights): the codes decoded here (i8 q * scale[o], q8_0 and q4_0 blocks as
ggml defines them, times 2^shift[j]), the forward pass in float64, and for
--int8 the int8 products emulated (each row times 2^shift in f32, its int8
codes, exact integer dots, (float)dot * wscale * ascale in f32).

  qmodel_ref.py check F32.tq Q.tq DATA.tq OUT.tq [--int8] [--tol T]
      OUT.tq is tq-score -m Q.tq on DATA.tq; checks its scores against the
      reference of Q.tq within T (absolute, default 1e-5), and prints the
      agreement of Q.tq's decisions (argmax of the classes, the sign, the
      top row) with F32.tq's and the largest score difference from it."""
import sys

import numpy as np

import tqstream as ts


def f16(raw):
    return np.frombuffer(raw, dtype="<f2").astype(np.float32)


def blocks(dtype, raw, n, d):
    """q8_0 / q4_0 rows [n, d] as f32 (ggml's dequantize_row_*)."""
    bs = 34 if dtype == "q8_0" else 18
    b = np.frombuffer(raw, dtype=np.uint8)[: n * d // 32 * bs].reshape(-1, bs)
    dd = f16(b[:, :2].tobytes())
    if dtype == "q8_0":
        q = b[:, 2:].view(np.int8).astype(np.float32)
    else:
        lo = (b[:, 2:] & 15).astype(np.float32) - 8
        hi = (b[:, 2:] >> 4).astype(np.float32) - 8
        q = np.concatenate([lo, hi], axis=1)
    return (q * dd[:, None]).reshape(n, d)


def frames(path):
    return {f["name"]: f for f in ts.read(open(path, "rb").read())}


def rows(path, name):
    """Every frame NAME of a stream (batches), concatenated, as float64."""
    fr = [f for f in ts.read(open(path, "rb").read()) if f["name"] == name]
    return np.concatenate([ts.to_numpy(f).astype(np.float64) for f in fr])


def layers_of(path):
    """[(W f64 [in, out] as decoded, b f64 [out], i8 parts or None)], meta."""
    fr = frames(path)
    meta = fr["model"]["meta"]
    names = ["w"] if "w" in fr else ["w%d" % i for i in range(1, 17) if "w%d" % i in fr]
    out = []
    for wn in names:
        f = fr[wn]
        bn = "b" + wn[1:]
        b = ts.to_numpy(fr[bn]).astype(np.float64).reshape(-1)
        shift = ts.to_numpy(fr[wn + "_shift"]).astype(np.int64) if wn + "_shift" in fr else None
        dt = f["dtype"]
        if dt in ("i8", "q8_0", "q4_0"):
            o, i = f["dims"]
            if dt == "i8":
                q = np.frombuffer(f["raw"], dtype=np.int8)[: o * i].reshape(o, i)
                s = ts.to_numpy(fr[wn + "_scale"]).astype(np.float32)
                wt = q.astype(np.float32) * s[:, None]
                parts = (q, s, shift)
            else:
                wt = blocks(dt, f["raw"], o, i)
                parts = None
            if shift is not None:
                wt = wt * np.exp2(shift.astype(np.float64))[None, :]
            W = wt.astype(np.float64).T
        else:
            W = ts.to_numpy(f).astype(np.float64).reshape(-1, len(b))
            parts = None
        out.append((W, b, parts))
    return out, meta


def half_even(v):
    return np.rint(v)  # NumPy rounds half to even


def int8_product(x, parts, b):
    """The int8 product of man/tq-score.1 in f32, exactly."""
    q, s, shift = parts
    x = x.astype(np.float32)
    if shift is not None:
        x = x * np.exp2(shift.astype(np.float32))[None, :].astype(np.float32)
    amax = np.abs(x).max(axis=1)
    a = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        xq = np.where(a[:, None] > 0, half_even(x / a[:, None]), 0).astype(np.int64)
    dot = xq @ q.astype(np.int64).T
    v = (dot.astype(np.float32) * s[None, :]).astype(np.float32) * a[:, None]
    return (v.astype(np.float32) + b.astype(np.float32)).astype(np.float64)


def forward(path, x, int8=False):
    """All outputs [n, C] (probabilities for softmax, else the last layer's
    values after sigmoid), and the score tq-score gives."""
    layers, meta = layers_of(path)
    kind = meta["kind"]
    if meta.get("input", "raw") == "normalized":
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    out = {"linear": "linear", "logistic": "sigmoid", "softmax": "softmax"}.get(
        kind, meta.get("output", "linear"))
    act = meta.get("activation", "relu")
    h = x.astype(np.float64)
    for i, (W, b, parts) in enumerate(layers):
        h = int8_product(h, parts, b) if int8 and parts is not None else h @ W + b
        if i + 1 < len(layers):
            if act == "relu":
                h = np.maximum(h, 0)
            elif act == "tanh":
                h = np.tanh(h)
            elif act == "sigmoid":
                h = 1 / (1 + np.exp(-h))
            else:
                from math import erf
                h = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    if out == "sigmoid":
        p = 1 / (1 + np.exp(-h))
        return p, p[:, 0]
    if out == "softmax":
        e = np.exp(h - h.max(1, keepdims=True))
        p = e / e.sum(1, keepdims=True)
        return p, p[:, int(meta.get("class", h.shape[1] - 1))]
    return h, h[:, 0]


def decisions(p, kind_out):
    if p.shape[1] > 1:
        return p.argmax(axis=1)
    return (p[:, 0] > (0.5 if kind_out == "sigmoid" else 0)).astype(np.int64)


def check(f32p, qp, datap, outp, int8, tol):
    x = rows(datap, "emb")
    got = rows(outp, "score")
    meta = frames(qp)["model"]["meta"]
    sig = meta["kind"] == "logistic" or meta.get("output") == "sigmoid"
    pf, sf = forward(f32p, x)
    pq, sq = forward(qp, x, int8)
    err = np.abs(got - sq).max()
    agree = (decisions(pf, "sigmoid" if sig else "linear") ==
             decisions(pq, "sigmoid" if sig else "linear")).mean()
    top = int(np.argmax(got) == np.argmax(sf))
    print("rows %d, decisions equal %.4f, top row %s, score diff from f32 max %.3g, "
          "from the reference %.3g" % (len(x), agree, "equal" if top else "differs",
                                       np.abs(got - sf).max(), err))
    if not err <= tol:
        sys.exit("tq-score differs from the reference of the decoded model by %.3g > %g"
                 % (err, tol))
    return agree, np.abs(got - sf).max()


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "check":
        int8 = "--int8" in a
        tol = float(a[a.index("--tol") + 1]) if "--tol" in a else 1e-5
        pos = [v for i, v in enumerate(a[1:], 1) if not v.startswith("--") and
               not a[i - 1].startswith("--")]
        agree, diff = check(pos[0], pos[1], pos[2], pos[3], int8, tol)
        mina = float(a[a.index("--agree") + 1]) if "--agree" in a else 0.995
        maxd = float(a[a.index("--maxdiff") + 1]) if "--maxdiff" in a else 1.0
        if agree < mina:
            sys.exit("decisions equal on %.4f of rows < %g" % (agree, mina))
        if diff > maxd:
            sys.exit("scores differ from the f32 model's by %.3g > %g" % (diff, maxd))
    else:
        sys.exit(__doc__)
