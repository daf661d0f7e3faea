"""simref.py: float64 references for tq-simmat's tests (NumPy only; shares no
code with tq). Usage: simref.py make OUT NQ NDB D SEED [keys]  writes a stream of
batches of "key" and "emb"; simref.py check MODE ARGS... compares a tq-simmat
output with the brute-force reference and exits 1 with a message on a difference."""
import sys
import numpy as np
import tqstream as tqs

# Tolerances. Top-k and threshold scores of tq are exact scores of the f32 rows
# (cosine: of the rows normalized in f32), rounded once: against float64 on the
# raw rows they differ by the f32 normalization, a few 2^-24 relative: 1e-5.
# The full matrix comes from an f32 matrix product: error <= d 2^-24 |q||x|,
# 2.3e-5 at d = 384 for unit rows: 1e-4 absolute. Pairs whose reference score
# lies within those of a decision boundary (a rank, a threshold) are not judged.
TOL = 1e-5
TOL_FULL = 1e-4


def load(path):
    frames = tqs.read(open(path, "rb").read())
    return frames


def rows(path, name="emb"):
    fr = load(path)
    x = [tqs.to_numpy(f) for f in fr if f["name"] == name]
    k = [tqs.to_numpy(f) for f in fr if f["name"] == "key"]
    x = np.concatenate(x).astype(np.float64)
    keys = sum([list(a) for a in k], []) if k else None
    return x, keys


def scores(q, x, metric):
    if metric == "cosine":
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    if metric == "l2":
        return -((q[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    return q @ x.T


def make(out, nq, ndb, d, seed, keys=None, batch=37):
    rng = np.random.default_rng(int(seed))
    x = rng.standard_normal((int(ndb), int(d))).astype(np.float32)
    with open(out, "wb") as f:
        for b in range(0, int(ndb), batch):
            part = x[b:b + batch]
            kk = ["doc%d" % i for i in range(b, b + len(part))] if keys == "str" else \
                np.arange(b, b + len(part), dtype=np.int64) * 10
            if keys == "str":
                f.write(tqs.frame("key", "str", [len(kk)], tqs.str_payload(kk)))
            else:
                f.write(tqs.array_frame("key", kk))
            f.write(tqs.array_frame("emb", part))


def fail(msg):
    print("simref: " + msg, file=sys.stderr)
    sys.exit(1)


def check_topk(out, qpath, dbpath, metric, k):
    k = int(k)
    q, _ = rows(qpath)
    x, dbkeys = rows(dbpath)
    fr = load(out)
    idx = np.concatenate([tqs.to_numpy(f) for f in fr if f["name"] == "idx"])
    sc = np.concatenate([tqs.to_numpy(f) for f in fr if f["name"] == "score"])
    dk = [f for f in fr if f["name"] == "db_key"]
    s = scores(q, x, metric)
    for i in range(len(q)):
        order = sorted(range(len(x)), key=lambda j: (-s[i, j], j))
        want = order[:k]
        for r in range(min(k, len(x))):
            if idx[i, r] != want[r]:
                # only a near tie may swap: the two reference scores agree within TOL
                if abs(s[i, idx[i, r]] - s[i, want[r]]) > TOL:
                    fail("query %d rank %d: idx %d, expected %d" % (i, r, idx[i, r], want[r]))
            if abs(sc[i, r] - s[i, idx[i, r]]) > TOL * max(1, abs(s[i, idx[i, r]])):
                fail("query %d rank %d: score %r, expected %r" % (i, r, sc[i, r], s[i, idx[i, r]]))
        if k > len(x) and not (idx[i, len(x):] == -1).all():
            fail("query %d: empty slots not -1" % i)
    if dbkeys is not None:
        got = sum([list(np.asarray(tqs.to_numpy(f)).reshape(-1)) for f in dk], [])
        want = [dbkeys[j] if j >= 0 else None for j in idx.reshape(-1)]
        for g, w in zip(got, want):
            if w is not None and g != w:
                fail("db_key %r, expected %r" % (g, w))


def check_full(out, qpath, dbpath, metric):
    q, _ = rows(qpath)
    x, _ = rows(dbpath)
    sim = np.concatenate([tqs.to_numpy(f) for f in load(out) if f["name"] == "sim"])
    s = scores(q, x, metric)
    scale = np.abs(s).max() if metric == "l2" else 1
    err = np.abs(sim - s).max()
    if sim.shape != s.shape or err > TOL_FULL * scale:
        fail("full matrix %s: max error %g" % (sim.shape, err))


def check_threshold(out, qpath, dbpath, metric, t, self_):
    t = float(t)
    q, _ = rows(qpath)
    x, _ = rows(dbpath)
    fr = load(out)
    i = np.concatenate([tqs.to_numpy(f) for f in fr if f["name"] == "i"])
    j = np.concatenate([tqs.to_numpy(f) for f in fr if f["name"] == "j"])
    v = np.concatenate([tqs.to_numpy(f) for f in fr if f["name"] == "score"])
    s = scores(q, x, metric)
    got = set(zip(i.tolist(), j.tolist()))
    if len(got) != len(i):
        fail("duplicate pairs")
    for a in range(len(q)):
        for b in range(len(x)):
            if self_ == "self" and b <= a:
                if (a, b) in got:
                    fail("pair (%d, %d) with i >= j" % (a, b))
                continue
            if abs(s[a, b] - t) <= TOL:
                continue
            if (s[a, b] >= t) != ((a, b) in got):
                fail("pair (%d, %d) score %r: %s" % (a, b, s[a, b], "missing" if s[a, b] >= t else "extra"))
    for a, b, c in zip(i, j, v):
        if abs(c - s[a, b]) > TOL:
            fail("pair (%d, %d): score %r, expected %r" % (a, b, c, s[a, b]))
    if (np.diff(i) < 0).any():
        fail("pairs not in query order")
    # the pairs are labelled by key_i (query keys) and key_j (database keys),
    # and no query frame (key, emb) passes: its rows are not the pairs'
    names = {f["name"] for f in fr}
    if names - {"i", "j", "score", "key_i", "key_j"}:
        fail("frames other than the pairs': %r" % sorted(names - {"i", "j", "score", "key_i", "key_j"}))
    _, qkeys = rows(qpath)
    _, xkeys = rows(dbpath)
    for name, want, at in (("key_i", qkeys, i), ("key_j", xkeys, j)):
        got = [tqs.to_numpy(f) for f in fr if f["name"] == name]
        if want is None:
            if got:
                fail("%s without keys in the input" % name)
            continue
        got = sum([list(a) for a in got], [])
        if got != [want[k] for k in at.tolist()]:
            fail("%s: %r..., expected %r..." % (name, got[:5], [want[k] for k in at.tolist()][:5]))


def check_dedup(out, inp, metric, t, dbpath=None):
    t = float(t)
    x, keys = rows(inp)
    kept = [] if dbpath is None else list(rows(dbpath)[0])
    want = []
    for r in range(len(x)):
        if kept:
            s = scores(x[r:r + 1], np.array(kept), metric)[0]
            if (np.abs(s - t) <= TOL).any():
                fail("test data too close to the threshold (pick another)")
            if np.where(np.isnan(s), -np.inf, s).max() >= t:  # NaN never matches
                continue
        kept.append(x[r])
        want.append(keys[r])
    got_x, got_keys = rows(out)
    if got_keys != want:
        fail("kept keys %r..., expected %r..." % (got_keys[:10], want[:10]))
    xi = {k: r for r, k in enumerate(keys)}
    if not np.array_equal(got_x, np.array([x[xi[k]] for k in want]).reshape(got_x.shape), equal_nan=True):
        fail("kept rows differ from the input rows")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"make": make, "topk": check_topk, "full": check_full, "threshold": check_threshold,
     "dedup": check_dedup}[cmd](*args)
