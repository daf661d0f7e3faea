"""train_ref.py: float64 NumPy (and scikit-learn) references for tq-train's
tests. It reads and writes streams with tqstream.py (no tq code).

  train_ref.py data DIR LOSS [--std] [--n N]  small data DIR/in.tq for LOSS
                                        (N rows, a multiple of 40; default 40)
  train_ref.py steps DIR MODEL.tq OPTION...
        MODEL.tq (trained on DIR/in.tq with full batches) against float64
        steps of the same optimizer from the zero start of single-layer models
  train_ref.py forward MODEL.tq IN.tq SCORES.tq
        tq-score's scores of IN.tq against a float64 forward of MODEL.tq
  train_ref.py digits DIR                 DIR/train.tq, DIR/test.tq (load_digits)
  train_ref.py accuracy MODEL.tq DIR [--sklearn]
        prints the test accuracy of MODEL.tq (float64 forward); with --sklearn,
        checks it is within 0.01 of LogisticRegression on standardized inputs
  train_ref.py skdata DIR NAME           DIR/train.tq, DIR/test.tq: scikit-learn's
        bundled load_NAME, split 70/30 (stratified but for diabetes, random_state 0)
  train_ref.py skcheck MODEL.tq DIR NAME [--coef REL] [--slack S]
        MODEL.tq (tq-train's defaults, --standardize) against scikit-learn's
        defaults on standardized inputs (LogisticRegression(); for diabetes,
        LinearRegression()): test accuracy (R^2) within S (default 0.01), and
        with --coef, the weights in the standardized space within REL of the
        norm of scikit-learn's (largest difference / norm)
The semantics checked are those of man/tq-train.1 and man/tq-score.1."""
import sys

import numpy as np

import tqstream as ts


def write(path, frames):
    with open(path, "wb") as f:
        f.write(b"".join(frames))


def load(path):
    return {f["name"]: (ts.to_numpy(f), f["meta"]) for f in ts.read(open(path, "rb").read())}


def model(path):
    fr = load(path)
    meta = fr["model"][1]
    kind = meta["kind"]
    if kind != "mlp":
        w = fr["w"][0].astype(np.float64)
        layers = [(w.reshape(w.shape[0], -1), fr["b"][0].astype(np.float64).reshape(-1))]
    else:
        layers, i = [], 1
        while "w%d" % i in fr:
            layers.append((fr["w%d" % i][0].astype(np.float64), fr["b%d" % i][0].astype(np.float64)))
            i += 1
    return kind, meta, layers


def act(name, z):
    from math import erf
    if name == "relu":
        return np.maximum(z, 0)
    if name == "tanh":
        return np.tanh(z)
    if name == "sigmoid":
        return 1 / (1 + np.exp(-z))
    return 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2)))


def logits(path, x):
    kind, meta, layers = model(path)
    h = x.astype(np.float64)
    for i, (w, b) in enumerate(layers):
        h = h @ w + b
        if i + 1 < len(layers):
            h = act(meta.get("activation", "relu"), h)
    return kind, meta, h


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cmd_forward(mpath, inpath, spath):
    x = load(inpath)["emb"][0]
    kind, meta, z = logits(mpath, x)
    out = meta.get("output", {"logistic": "sigmoid", "softmax": "softmax"}.get(kind, "linear"))
    if out == "sigmoid":
        ref = 1 / (1 + np.exp(-z[:, 0]))
    elif out == "softmax":
        ref = softmax(z)[:, int(meta.get("class", z.shape[1] - 1))]
    else:
        ref = z[:, 0]
    got = load(spath)["score"][0].astype(np.float64)
    # tq-score runs the model in f32: each layer's sums of <= 64 products carry
    # a few 1e-7 relative; 1e-5 + 1e-5 |ref| is far above that and far below
    # any wrong weight, layer or output function.
    err = np.abs(got - ref) - (1e-5 + 1e-5 * np.abs(ref))
    if err.max() > 0:
        i = int(err.argmax())
        sys.exit("row %d: tq-score %.9g, float64 forward %.9g" % (i, got[i], ref[i]))


# ---- small data and the optimizer steps ----

def cmd_data(d, loss, std, n=40):
    rng = np.random.default_rng(5)
    dim = 6
    x = rng.standard_normal((n, dim)) * (3 if std else 1) + (5 if std else 0)
    frames = []
    if loss == "softmax":
        y = rng.integers(0, 3, n).astype(np.int64)
    elif loss == "logistic":
        y = (rng.random(n) < 0.4).astype(np.float32)
    elif loss == "listwise":
        sizes = [3, 5, 2, 4, 6, 3, 5, 4, 4, 4] * (n // 40)
        g = np.repeat(np.arange(len(sizes)) * 7 - 20, sizes).astype(np.int64)
        y = np.zeros(n, np.float32)
        at = 0
        for k, s in enumerate(sizes):
            y[at + k % s] = 1
            at += s
        frames.append(ts.array_frame("group", g))
    else:
        y = (x @ rng.standard_normal(dim) + 0.5 * rng.standard_normal(n)).astype(np.float32)
    frames += [ts.array_frame("emb", x.astype(np.float32)), ts.array_frame("y", y)]
    write(d + "/in.tq", frames)


def opt(args, name, default, conv=float):
    return conv(args[args.index(name) + 1]) if name in args else default


def cmd_steps(d, mpath, args):
    fr = load(d + "/in.tq")
    x = fr["emb"][0].astype(np.float64)
    y = fr["y"][0].astype(np.float64)
    n, dim = x.shape
    kind = opt(args, "--model", "logistic", str)
    loss = opt(args, "--loss", {"linear": "mse", "logistic": "logistic", "softmax": "softmax"}[kind], str)
    optim = opt(args, "--optimizer", "adam", str)
    lr0 = opt(args, "--lr", 0.01 if optim == "sgd" else 0.001)
    mom = opt(args, "--momentum", 0.9)
    b1, b2, eps = opt(args, "--beta1", 0.9), opt(args, "--beta2", 0.999), opt(args, "--eps", 1e-8)
    l2 = opt(args, "--l2", 0.0)
    wd = opt(args, "--weight-decay", 0.01 if optim == "adamw" else 0.0)
    sched = opt(args, "--schedule", "constant", str)
    warm = opt(args, "--warmup", 0, int)
    epochs = opt(args, "--epochs", 10, int)
    std = "--standardize" in args
    mu = x.mean(axis=0) if std else np.zeros(dim)
    sd = x.std(axis=0) if std else np.ones(dim)
    xs = (x - mu) / sd
    c = int(y.max()) + 1 if loss == "softmax" else 1
    W, B = np.zeros((dim, c)), np.zeros(c)
    m = [np.zeros_like(W), np.zeros_like(B)]
    v = [np.zeros_like(W), np.zeros_like(B)]
    total = epochs  # one full batch an epoch
    for t in range(total):
        z = xs @ W + B
        if loss == "mse":
            dz = 2 * (z - y[:, None]) / n
        elif loss == "logistic":
            dz = (1 / (1 + np.exp(-z)) - y[:, None]) / n
        elif loss == "softmax":
            dz = softmax(z)
            dz[np.arange(n), y.astype(int)] -= 1
            dz /= n
        else:
            g = fr["group"][0]
            starts = [0] + [i for i in range(1, n) if g[i] != g[i - 1]] + [n]
            dz = np.zeros_like(z)
            for a, b in zip(starts[:-1], starts[1:]):
                p = softmax(z[a:b, 0][None, :])[0]
                dz[a:b, 0] = (p - y[a:b] / y[a:b].sum()) / (len(starts) - 1)
        grads = [xs.T @ dz + l2 * W, dz.sum(axis=0)]
        if t < warm:
            lr = lr0 * (t + 1) / warm
        elif sched == "constant" or total <= warm:
            lr = lr0
        else:
            f = min(1.0, (t - warm) / (total - warm))
            lr = lr0 * (1 - f) if sched == "linear" else lr0 * 0.5 * (1 + np.cos(np.pi * f))
        params = [W, B]
        for k in range(2):
            g = grads[k]
            if optim == "sgd":
                m[k] = mom * m[k] + g
                params[k] -= lr * m[k]
                continue
            if optim == "adamw" and k == 0:
                params[k] *= 1 - lr * wd
            m[k] = b1 * m[k] + (1 - b1) * g
            v[k] = b2 * v[k] + (1 - b2) * g * g
            mh, vh = m[k] / (1 - b1 ** (t + 1)), v[k] / (1 - b2 ** (t + 1))
            params[k] -= lr * mh / (np.sqrt(vh) + eps)
    # fold the standardization, as the model file holds it
    Wf = W / sd[:, None]
    Bf = B - (mu / sd) @ W
    _, _, layers = model(mpath)
    gw, gb = layers[0]
    # f32 arithmetic over a few steps of 40 rows: errors of a few 1e-7
    # relative to the weights' scale; 1e-5 of it catches any wrong term,
    # step, moment or schedule (each changes the weights by >1e-3 of it).
    scale = max(np.abs(Wf).max(), np.abs(Bf).max())
    e = max(np.abs(gw - Wf).max(), np.abs(gb - Bf).max()) / scale
    if e > 1e-5:
        sys.exit("weights differ from the float64 steps by %.3g of their scale\nref w %s\ngot w %s"
                 % (e, Wf.ravel()[:6], gw.ravel()[:6]))


# ---- digits ----

def digits_split():
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    p = rng.permutation(len(y))
    cut = 1347  # the 1347 training rows of the issue, 450 test rows
    return x[p[:cut]], y[p[:cut]], x[p[cut:]], y[p[cut:]]


def cmd_digits(d):
    xtr, ytr, xte, yte = digits_split()
    for name, x, y in (("train", xtr, ytr), ("test", xte, yte)):
        write("%s/%s.tq" % (d, name), [ts.array_frame("emb", x.astype(np.float32)),
                                       ts.array_frame("y", y.astype(np.int64))])


def cmd_accuracy(mpath, d, sk):
    fr = load(d + "/test.tq")
    x, y = fr["emb"][0], fr["y"][0]
    _, _, z = logits(mpath, x)
    acc = float((z.argmax(axis=1) == y).mean())
    print("tq-train %.4f" % acc)
    if sk:
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler
        xtr, ytr, xte, yte = digits_split()
        s = StandardScaler().fit(xtr)
        ref = LogisticRegression(max_iter=5000).fit(s.transform(xtr), ytr)
        ska = float((ref.predict(s.transform(xte)) == yte).mean())
        print("scikit-learn %.4f" % ska)
        if abs(acc - ska) > 0.01 + 1e-9:
            sys.exit("accuracy %.4f is not within 0.01 of scikit-learn's %.4f" % (acc, ska))


def sk_split(name):
    from sklearn import datasets
    from sklearn.model_selection import train_test_split
    x, y = getattr(datasets, "load_" + name)(return_X_y=True)
    reg = name == "diabetes"
    # the features as the stream carries them (f32), for both sides
    x = x.astype(np.float32).astype(np.float64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, random_state=0,
                                          stratify=None if reg else y)
    return reg, xtr, xte, ytr, yte


def cmd_skdata(d, name):
    reg, xtr, xte, ytr, yte = sk_split(name)
    binary = not reg and len(np.unique(ytr)) == 2
    for part, x, y in (("train", xtr, ytr), ("test", xte, yte)):
        yy = y.astype(np.float32) if reg or binary else y.astype(np.int64)
        write("%s/%s.tq" % (d, part), [ts.array_frame("emb", x.astype(np.float32)),
                                       ts.array_frame("y", yy)])


def cmd_skcheck(mpath, d, name, coef, slack):
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.metrics import r2_score
    from sklearn.preprocessing import StandardScaler
    reg, xtr, xte, ytr, yte = sk_split(name)
    _, _, [(w, b)] = model(mpath)
    s = StandardScaler().fit(xtr)
    ref = (LinearRegression() if reg else LogisticRegression()).fit(s.transform(xtr), ytr)
    z = xte @ w + b
    if reg:
        a = r2_score(yte, z[:, 0])
    elif w.shape[1] == 1:
        a = float(((z[:, 0] > 0) == yte).mean())
    else:
        a = float((z.argmax(axis=1) == yte).mean())
    sa = ref.score(s.transform(xte), yte)
    # the model file holds W / sd (standardization folded in): W = w sd
    rc = ref.coef_.T if ref.coef_.ndim == 2 else ref.coef_[:, None]
    rel = np.abs(w * s.scale_[:, None] - rc).max() / np.linalg.norm(rc)
    print("%s: tq-train %.4f scikit-learn %.4f (%s); weights differ by %.2e of the norm %.4g"
          % (name, a, sa, "R^2" if reg else "accuracy", rel, np.linalg.norm(rc)))
    if abs(a - sa) > slack + 1e-9:
        sys.exit("%s: %.4f is not within %g of scikit-learn's %.4f" % (name, a, slack, sa))
    if coef is not None and not rel <= coef:
        sys.exit("%s: the weights differ from scikit-learn's by %.3g of their norm (> %g)"
                 % (name, rel, coef))


def main(a):
    if a[0] == "data":
        cmd_data(a[1], a[2], "--std" in a, int(a[a.index("--n") + 1]) if "--n" in a else 40)
    elif a[0] == "steps":
        cmd_steps(a[1], a[2], a[3:])
    elif a[0] == "forward":
        cmd_forward(a[1], a[2], a[3])
    elif a[0] == "digits":
        cmd_digits(a[1])
    elif a[0] == "skdata":
        cmd_skdata(a[1], a[2])
    elif a[0] == "skcheck":
        cmd_skcheck(a[1], a[2], a[3], opt(a, "--coef", None), opt(a, "--slack", 0.01))
    elif a[0] == "accuracy":
        cmd_accuracy(a[1], a[2], "--sklearn" in a)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
