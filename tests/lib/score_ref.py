"""score_ref.py: the float64 NumPy reference of tq-score for the tests, and
the inputs it scores. It reads and writes streams with tqstream.py (no tq code).

  score_ref.py gen DIR [--seed S] [--d D]     inputs, query files and models
  score_ref.py check DIR OUT.tq OPTION...     OUT.tq against the reference of
                                              tq-score OPTION... DIR/in.tq
The semantics checked are those of man/tq-score.1."""
import sys

import numpy as np

import tqstream as ts

# Scores are sums of a few f32 dot products (d <= 64) and small networks, each
# rounded to f32 once: their error is a few 1e-7 times the magnitudes summed.
# 1e-4 + 1e-5 |ref| leaves margin for that and still catches a wrong feature,
# weight or group (errors of 1e-2 or more).
ATOL, RTOL = 1e-4, 1e-5


def write(path, frames):
    with open(path, "wb") as f:
        f.write(b"".join(frames))


def model_frames(kind, layers, **meta):
    """A model file: the "model" header (format version 1) and its weights."""
    out = [scalar("model", np.int64(1), "i64", meta=dict(kind=kind, **meta))]
    for name, arr in layers:
        a = np.asarray(arr, dtype=np.float32)
        out.append(scalar(name, a, "f32") if a.ndim == 0 else ts.array_frame(name, a))
    return out


def scalar(name, v, dtype, meta=None):
    """A rank-0 frame (array_frame would make it rank 1)."""
    return ts.frame(name, dtype, [], np.asarray(v).astype("<" + ts.NUMPY[dtype][1:]).tobytes(),
                    meta=meta)


def gen(d, seed):
    rng = np.random.default_rng(seed)
    sizes = [1, 5, 3, 12, 1, 7, 40, 2, 9, 4, 1, 6]
    ids = rng.permutation(1000)[:len(sizes)] - 300       # any i64, negative too
    group = np.repeat(ids, sizes).astype(np.int64)
    n = len(group)
    emb = rng.standard_normal((n, d)).astype(np.float32)
    emb[3] = 0                                           # a zero vector: cosine 0
    lp = rng.uniform(-5, 0, n).astype(np.float32)
    tag = np.arange(2 * n, dtype=np.int32).reshape(n, 2)
    keys = ["r%d" % i for i in range(n)]
    frames, at = [], 0
    for cut in (5, 17, 30, 31, 60, n):                  # batches cut across groups
        sl = slice(at, cut)
        frames += [ts.frame("key", "str", [cut - at], ts.str_payload(keys[sl])),
                   ts.array_frame("emb", emb[sl], meta=dict(model="test")),
                   ts.array_frame("group", group[sl]),
                   ts.array_frame("lp", lp[sl]),
                   ts.array_frame("tag", tag[sl]),
                   ts.array_frame("note", np.arange(3, dtype=np.int64))]
        at = cut
    write(DIR + "/in.tq", frames)
    np.savez(DIR + "/in.npz", emb=emb, group=group, lp=lp, tag=tag)
    # queries: one per group id (shuffled, with ids the input lacks), and one for all
    qids = np.concatenate([ids, [5000, -5000]])
    perm = rng.permutation(len(qids))
    q = rng.standard_normal((len(qids), d)).astype(np.float32)
    write(DIR + "/query.tq", [ts.array_frame("group", qids[perm].astype(np.int64)),
                              ts.array_frame("emb", q[perm])])
    write(DIR + "/query1.tq", [ts.array_frame("emb", q[:1] * 3)])
    w = lambda *s: rng.standard_normal(s) * 0.5
    write(DIR + "/linear.tq", model_frames("linear", [("w", w(d)), ("b", np.float32(0.25))]))
    write(DIR + "/logistic.tq", model_frames("logistic", [("w", w(d, 1)), ("b", w(1))],
                                             input="normalized"))
    write(DIR + "/softmax.tq", model_frames("softmax", [("w", w(d, 4)), ("b", w(4))], **{"class": 2}))
    write(DIR + "/mlp.tq", model_frames("mlp", [("w1", w(d, 8)), ("b1", w(8)),
                                                ("w2", w(8, 1)), ("b2", w(1))]))
    write(DIR + "/mlp3.tq", model_frames("mlp", [("w1", w(d, 6)), ("b1", w(6)),
                                                 ("w2", w(6, 5)), ("b2", w(5)),
                                                 ("w3", w(5, 3)), ("b3", w(3))],
                                         activation="tanh", output="softmax", input="normalized"))
    write(DIR + "/mlp-gelu.tq", model_frames("mlp", [("w1", w(d, 8)), ("b1", w(8)),
                                                     ("w2", w(8, 1)), ("b2", w(1))],
                                             activation="gelu", output="sigmoid"))


def load_model(path):
    fr = ts.read(open(path, "rb").read())
    meta = [f for f in fr if f["name"] == "model"][0]["meta"]
    t = {f["name"]: ts.to_numpy(f).astype(np.float64) for f in fr if f["name"] != "model"}
    return meta, t


def erf(x):
    from math import erf as e
    return np.vectorize(e)(x)


def model_ref(path, x):
    meta, t = load_model(path)
    kind = meta["kind"]
    if meta.get("input", "raw") == "normalized":
        x = unit(x)
    if kind in ("linear", "logistic", "softmax"):
        layers = [(t["w"].reshape(x.shape[1], -1), t["b"].reshape(-1))]
        out = {"linear": "linear", "logistic": "sigmoid", "softmax": "softmax"}[kind]
    else:
        layers, i = [], 1
        while "w%d" % i in t:
            layers.append((t["w%d" % i], t["b%d" % i]))
            i += 1
        out = meta.get("output", "linear")
    act = meta.get("activation", "relu")
    h = x
    for i, (w, b) in enumerate(layers):
        h = h @ w + b
        if i + 1 < len(layers):
            h = {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh,
                 "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
                 "gelu": lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2)))}[act](h)
    if out == "sigmoid":
        return 1 / (1 + np.exp(-h[:, 0]))
    if out == "softmax":
        e = np.exp(h - h.max(1, keepdims=True))
        p = e / e.sum(1, keepdims=True)
        return p[:, int(meta.get("class", h.shape[1] - 1))]
    return h[:, 0]


def unit(x):
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(n, 1e-12)


def parse(opts):
    o = dict(query=None, consensus=False, model=None, feature=[], weights=None, top=0,
             sort=False, group="group")
    i = 0
    while i < len(opts):
        a = opts[i]
        if a in ("--query", "-m", "--model", "--feature", "--weights", "--top", "--group"):
            v = opts[i + 1]
            i += 2
            if a == "--query":
                o["query"] = v
            elif a in ("-m", "--model"):
                o["model"] = v
            elif a == "--feature":
                o["feature"].append(v)
            elif a == "--weights":
                o["weights"] = [float(s) for s in v.split(",")]
            elif a == "--top":
                o["top"] = int(v)
            else:
                o["group"] = v
            continue
        if a == "--consensus":
            o["consensus"] = True
        elif a == "--sort":
            o["sort"] = True
        else:
            raise SystemExit("score_ref: option %s is not modelled" % a)
        i += 1
    return o


def reference(data, o):
    """Per row: the float64 score; the groups as (start, end) runs."""
    x = data["emb"].astype(np.float64)
    n = len(x)
    g = data["group"] if o["group"] == "group" else np.zeros(n, dtype=np.int64)
    runs, s = [], 0
    for i in range(1, n + 1):
        if i == n or g[i] != g[s]:
            runs.append((s, i))
            s = i
    feats = []
    u = unit(x)
    if o["query"]:
        fr = ts.read(open(o["query"], "rb").read())
        q = unit(np.concatenate([ts.to_numpy(f) for f in fr if f["name"] == "emb"]).astype(np.float64))
        qg = [ts.to_numpy(f) for f in fr if f["name"] == "group"]
        f = np.zeros(n)
        for a, b in runs:
            row = 0 if not qg else int(np.nonzero(qg[0] == g[a])[0][0])
            f[a:b] = u[a:b] @ q[row]
        feats.append(f)
    if o["consensus"]:
        f = np.zeros(n)
        for a, b in runs:
            m = b - a
            if m > 1:
                s = u[a:b] @ u[a:b].T
                f[a:b] = (s.sum(1) - np.diag(s)) / (m - 1)
        feats.append(f)
    if o["model"]:
        feats.append(model_ref(o["model"], x))
    for name in o["feature"]:
        feats.append(data[name].astype(np.float64).reshape(n))
    w = o["weights"] or [1.0] * len(feats)
    assert len(w) == len(feats)
    return sum(wi * fi for wi, fi in zip(w, feats)), runs


def check(out_path, opts):
    data = dict(np.load(DIR + "/in.npz"))
    o = parse(opts)
    ref, runs = reference(data, o)
    fr = ts.read(open(out_path, "rb").read())
    get = lambda name: [ts.to_numpy(f) for f in fr if f["name"] == name]
    keys = [k for part in get("key") for k in part]
    rows = np.array([int(k[1:]) for k in keys], dtype=np.int64)
    cat = lambda name: np.concatenate(get(name)) if get(name) else np.zeros(0)
    score, rank = cat("score"), cat("rank")
    emb, group, lp, tag = cat("emb"), cat("group"), cat("lp"), cat("tag")
    bad = []
    # the aligned frames stay with their rows; the non-aligned pass through
    if not (np.array_equal(emb, data["emb"][rows]) and np.array_equal(group, data["group"][rows])
            and np.array_equal(lp, data["lp"][rows]) and np.array_equal(tag, data["tag"][rows])):
        bad.append("aligned frames do not follow their rows")
    if len(get("note")) != 6:
        bad.append("%d note frames passed through, not 6" % len(get("note")))
    if not (len(score) == len(rank) == len(rows)):
        bad.append("score, rank and key differ in length")
    err = np.abs(score.astype(np.float64) - ref[rows])
    if np.any(err > ATOL + RTOL * np.abs(ref[rows])):
        i = int(np.argmax(err))
        bad.append("row %d: score %.9g, reference %.9g" % (rows[i], score[i], ref[rows[i]]))
    # expected rows, ranks and order, group by group; near-ties (closer than the
    # tolerance) may rank either way in f32, so ranks come from tq's own scores
    # there, and from the reference everywhere else
    want = []
    for a, b in runs:
        r = ref[a:b]
        order = sorted(range(b - a), key=lambda i: (-r[i], i))
        gaps = np.diff(np.sort(r))
        near = len(gaps) and gaps.min() < 2 * (ATOL + RTOL * np.abs(r).max())
        if near:
            got = {int(k) - a: float(s) for k, s in zip(rows, score) if a <= k < b}
            full = np.zeros(b - a, dtype=np.float32)
            for i in range(b - a):
                full[i] = got.get(i, np.float32(ref[a + i]))
            order = sorted(range(b - a), key=lambda i: (-full[i], i))
        rk = np.empty(b - a, dtype=np.int64)
        rk[order] = np.arange(1, b - a + 1)
        keep = [i for i in (order if o["sort"] else range(b - a))
                if not o["top"] or rk[i] <= o["top"]]
        want += [(a + i, rk[i]) for i in keep]
    wrows = np.array([w[0] for w in want], dtype=np.int64)
    wrank = np.array([w[1] for w in want], dtype=np.int64)
    if not np.array_equal(rows, wrows):
        bad.append("rows out %s, expected %s" % (rows[:20].tolist(), wrows[:20].tolist()))
    elif not np.array_equal(rank, wrank):
        bad.append("ranks %s, expected %s" % (rank[:20].tolist(), wrank[:20].tolist()))
    if bad:
        raise SystemExit("score_ref: " + "; ".join(bad))
    print("ok: %d rows, max score error %.3g" % (len(rows), err.max() if len(err) else 0))


if __name__ == "__main__":
    cmd, DIR = sys.argv[1], sys.argv[2]
    if cmd == "gen":
        a = sys.argv[3:]
        gen(int(a[a.index("--d") + 1]) if "--d" in a else 16,
            int(a[a.index("--seed") + 1]) if "--seed" in a else 1)
    else:
        check(sys.argv[3], sys.argv[4:])
