"""greedy.py: float64 references for the sample scripts' tests (NumPy only).
  greedy.py dedup STREAM T [DB]   prints the keys of the rows a greedy cosine
                                  dedup keeps (a row goes when it scores >= T
                                  with a row kept before, or with a DB row)
  greedy.py topk DB Q K           prints, per query, the keys of its K nearest
                                  database rows by cosine, ties to the lower
                                  index, and their scores
Exits 3 when a decision lies within 1e-5 of a threshold or a tie: the f32
scores of tq differ from float64 by a few 2^-24 (see simref.py), so the test
data must keep away from those."""
import sys
import numpy as np
import tqstream as tqs

TOL = 1e-5


def rows(path):
    fr = tqs.read(open(path, "rb").read())
    x = np.concatenate([tqs.to_numpy(f) for f in fr if f["name"] != "key"]).astype(np.float64)
    k = sum([list(tqs.to_numpy(f)) for f in fr if f["name"] == "key"], [])
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n > 0, n, 1), k


def dedup(path, t, db=None):
    t = float(t)
    x, keys = rows(path)
    kept = list(rows(db)[0]) if db else []
    for r in range(len(x)):
        if kept:
            s = np.array(kept) @ x[r]
            if (np.abs(s - t) <= TOL).any():
                sys.exit(3)
            if s.max() >= t:
                continue
        kept.append(x[r])
        print(keys[r])


def topk(db, q, k):
    x, xk = rows(db)
    y, _ = rows(q)
    for s in y @ x.T:
        o = np.argsort(-s, kind="stable")[: int(k)]
        if len(s) > int(k) and abs(s[o[-1]] - np.sort(s)[::-1][int(k)]) <= TOL:
            sys.exit(3)
        print("\t".join(str(xk[i]) for i in o) + "\t" + "\t".join("%.6f" % s[i] for i in o))


if __name__ == "__main__":
    {"dedup": dedup, "topk": topk}[sys.argv[1]](*sys.argv[2:])
