"""simnan.py: does a NaN or an infinity stay where IEEE arithmetic puts it in
tq-simmat's output? (NumPy only; shares no code with tq.) Each check compares
a run on poisoned inputs with a run on clean ones (or, for dedup, without the
poisoned row), on the same device: every score and rank that does not involve
the poisoned row must be the same bits, and the poisoned row's must follow
the man page's rule (a NaN ranks below every number, ties to the lower index).

  simnan.py gen DIR              inputs: q.tq, db.tq, their -nan and -inf
                                 forms (query 7, database row 30) and db-less.tq
  simnan.py full CLEAN BAD BADQ BADDB KIND METRIC
  simnan.py topk CLEAN BAD BADQ BADDB        (both runs with K = all rows)
  simnan.py prefix ALL SOME                  (-k K is the first K of -k all)
  simnan.py pairs CLEAN BAD BADQ BADDB T FULL (FULL: the poisoned full matrix)
  simnan.py dedup BAD LESS BADKEY            (kept keys: LESS's plus BADKEY)
Exits 1 with a message on a difference."""
import sys
import numpy as np
import tqstream as tqs

BADQ, BADDB = 7, 30


def fail(msg):
    print("simnan: " + msg, file=sys.stderr)
    sys.exit(1)


def get(path, name):
    fr = [tqs.to_numpy(f) for f in tqs.read(open(path, "rb").read()) if f["name"] == name]
    return np.concatenate(fr) if fr else np.zeros(0)


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def gen(d):
    rng = np.random.default_rng(7)
    nq, ndb, w = 40, 300, 24
    x = rng.standard_normal((ndb, w)).astype(np.float32)
    # rows 200..259 near-duplicate rows 20..79 (dedup drops them), and the
    # queries come near some rows: real decisions around the poisoned row 30
    x[200:260] = x[20:80] + 0.05 * rng.standard_normal((60, w)).astype(np.float32)
    q = np.concatenate([x[::15] + 0.1 * rng.standard_normal((20, w)).astype(np.float32),
                        rng.standard_normal((20, w)).astype(np.float32)])

    def db(path, x, keys):
        open(d + "/" + path, "wb").write(b"".join(
            tqs.array_frame("key", keys[b:b + 64]) + tqs.array_frame("emb", x[b:b + 64])
            for b in range(0, len(x), 64)))

    def qs(path, q):
        open(d + "/" + path, "wb").write(tqs.array_frame("emb", q[:25]) + tqs.array_frame("emb", q[25:]))

    keys = np.arange(ndb, dtype=np.int64)
    db("db.tq", x, keys)
    qs("q.tq", q)
    for kind, v in (("nan", np.nan), ("inf", np.inf)):
        y = x.copy(); y[BADDB, 3] = v
        db("db-%s.tq" % kind, y, keys)
        p = q.copy(); p[BADQ, 5] = v
        qs("q-%s.tq" % kind, p)
    keep = keys != BADDB
    db("db-less.tq", x[keep], keys[keep])


def full(clean, bad, badq, baddb, kind, metric):
    a, b = get(clean, "sim"), get(bad, "sim")
    badq, baddb = int(badq), int(baddb)
    if a.shape != b.shape:
        fail("full: shapes %s and %s" % (a.shape, b.shape))
    hit = np.zeros(a.shape, bool)
    if badq >= 0:
        hit[badq] = True
    if baddb >= 0:
        hit[:, baddb] = True
    if (bits(a[~hit]) != bits(b[~hit])).any():
        i, j = np.argwhere((bits(a) != bits(b)) & ~hit)[0]
        fail("full %s: score (%d, %d) moved from %r to %r" % (metric, i, j, a[i, j], b[i, j]))
    # a NaN reaches every score of its row; an infinity makes them infinite
    # or NaN (cosine: inf / inf is NaN; l2: 2 x.y - |x|^2 - |y|^2 may be too)
    if kind == "nan" or metric == "cosine":
        ok = np.isnan(b[hit]).all()
    else:
        ok = (~np.isfinite(b[hit])).all()
    if not ok:
        fail("full %s: the poisoned row's scores %r" % (metric, b[hit][:8]))


def in_order(idx, sc, what):
    """The man page's order: larger first, NaN below every number, ties to
    the lower index."""
    for r in range(len(idx) - 1):
        s1, s2, i1, i2 = sc[r], sc[r + 1], idx[r], idx[r + 1]
        if np.isnan(s1):
            ok = np.isnan(s2) and i1 < i2
        elif np.isnan(s2):
            ok = True
        else:
            ok = s1 > s2 or (s1 == s2 and i1 < i2)
        if not ok:
            fail("%s: rank %d (%d, %r) before (%d, %r)" % (what, r, i1, s1, i2, s2))


def topk(clean, bad, badq, baddb):
    ia, sa, ib, sb = get(clean, "idx"), get(clean, "score"), get(bad, "idx"), get(bad, "score")
    badq, baddb = int(badq), int(baddb)
    if ia.shape != ib.shape or ia.shape[1] != 300:
        fail("topk: shapes %s and %s" % (ia.shape, ib.shape))
    for i in range(len(ia)):
        in_order(ib[i], sb[i], "query %d" % i)
        if i == badq:
            continue
        # without the poisoned row, the same rows in the same order, same bits
        ka, kb = ia[i] != baddb, ib[i] != baddb
        if (ia[i][ka] != ib[i][kb]).any() or (bits(sa[i][ka]) != bits(sb[i][kb])).any():
            fail("topk: query %d's list changed beyond row %d" % (i, baddb))


def prefix(allk, somek):
    ia, sa, ib, sb = get(allk, "idx"), get(allk, "score"), get(somek, "idx"), get(somek, "score")
    k = ib.shape[1]
    if (ia[:, :k] != ib).any() or (bits(sa[:, :k]) != bits(sb)).any():
        i = np.argwhere((ia[:, :k] != ib).any(1) | (bits(sa[:, :k]) != bits(sb)).any(1))[0][0]
        fail("-k %d is not the first %d of the full list: query %d %s, %s" % (k, k, i, ib[i], ia[i, :k]))


def pairs(clean, bad, badq, baddb, t, fullpath):
    badq, baddb, t = int(badq), int(baddb), float(t)

    def load(p):
        return {(i, j): s for i, j, s in zip(get(p, "i").tolist(), get(p, "j").tolist(),
                                              bits(get(p, "score")).tolist())}

    a, b = load(clean), load(bad)
    out = lambda d: {k: v for k, v in d.items() if k[0] != badq and k[1] != baddb}
    if out(a) != out(b):
        fail("pairs: %d pairs changed beyond the poisoned rows" % len(set(out(a).items()) ^ set(out(b).items())))
    # the poisoned row's pairs: those of its infinite scores >= T (the full
    # matrix says which), none for a NaN
    sim = get(fullpath, "sim")
    want = {(i, j) for i, j in np.argwhere(sim >= t).tolist() if i == badq or j == baddb}
    got = {k for k in b if k[0] == badq or k[1] == baddb}
    if got != want:
        fail("pairs of the poisoned row: %s, expected %s" % (sorted(got)[:5], sorted(want)[:5]))


def dedup(bad, less, badkey):
    kb, kl = get(bad, "key").tolist(), get(less, "key").tolist()
    want = sorted(kl + [int(badkey)])
    if kb != want:
        fail("dedup: kept %d rows, expected %d (%s)" % (len(kb), len(want), sorted(set(kb) ^ set(want))[:8]))
    if len(kl) >= 299:
        fail("dedup: nothing was dropped, the test decides nothing")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"gen": gen, "full": full, "topk": topk, "prefix": prefix, "pairs": pairs, "dedup": dedup}[cmd](*args)
    print("ok")
