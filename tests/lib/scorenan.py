"""scorenan.py: does a NaN or an infinity stay where IEEE arithmetic puts it in
tq-score's output? (NumPy only; shares no code with tq.) The inputs are
score_ref.py's (its in.npz: groups that span batches), rewritten with row 12
(group 9..20) poisoned.

  scorenan.py gen DIR          DIR/clean.tq, and emb-nan.tq, emb-inf.tq (a value
                               of row 12's vector), lp-nan.tq, lp-inf.tq (its lp)
  scorenan.py check CLEAN BAD KIND SPREAD
      CLEAN and BAD: tq-score's outputs on clean.tq and a poisoned input, in
      input order. Rows outside the poisoned set (row 12; its whole group when
      SPREAD is "group": the consensus, where every row sees every other)
      keep their score bits; their ranks too in other groups, and their order
      in the poisoned one; a NaN makes the set's scores NaN; every group's
      ranks follow the man page (higher first, the earlier row on a tie, NaN
      last).
Exits 1 with a message on a difference."""
import sys
import numpy as np
import tqstream as ts

ROW = 12


def fail(msg):
    print("scorenan: " + msg, file=sys.stderr)
    sys.exit(1)


def get(path, name):
    return np.concatenate([ts.to_numpy(f) for f in ts.read(open(path, "rb").read())
                           if f["name"] == name])


def gen(d):
    z = np.load(d + "/in.npz")
    emb, group, lp = z["emb"], z["group"], z["lp"]
    n = len(group)

    def write(path, emb, lp):
        frames, at = [], 0
        for cut in (5, 17, 30, 31, 60, n):                 # score_ref.py's batches
            sl = slice(at, cut)
            frames += [ts.array_frame("emb", emb[sl]), ts.array_frame("group", group[sl]),
                       ts.array_frame("lp", lp[sl])]
            at = cut
        open(d + "/" + path, "wb").write(b"".join(frames))

    write("clean.tq", emb, lp)
    for kind, v in (("nan", np.nan), ("inf", -np.inf)):
        e = emb.copy(); e[ROW, 4] = v
        write("emb-%s.tq" % kind, e, lp)
        l = lp.copy(); l[ROW] = v
        write("lp-%s.tq" % kind, emb, l)


def check(clean, bad, kind, spread):
    ga, sa, ra = get(clean, "group"), get(clean, "score"), get(clean, "rank")
    gb, sb, rb = get(bad, "group"), get(bad, "score"), get(bad, "rank")
    if (ga != gb).any():
        fail("rows moved")
    hit = (ga == ga[ROW]) if spread == "group" else (np.arange(len(ga)) == ROW)
    ua, ub = sa.view(np.uint32), sb.view(np.uint32)
    if (ua[~hit] != ub[~hit]).any():
        i = np.flatnonzero((ua != ub) & ~hit)[0]
        fail("row %d's score moved from %r to %r" % (i, sa[i], sb[i]))
    if kind == "nan" and not np.isnan(sb[hit]).all():
        fail("poisoned scores %r are not NaN" % sb[hit])
    other = ga != ga[ROW]
    if (ra[other] != rb[other]).any():
        fail("ranks moved in groups without the poisoned row")
    g = np.flatnonzero(ga == ga[ROW])
    keep = [i for i in g if not hit[i]]
    if sorted(keep, key=lambda i: ra[i]) != sorted(keep, key=lambda i: rb[i]):
        fail("the other rows of the poisoned group changed order")
    for gid in np.unique(gb):
        rows = np.flatnonzero(gb == gid)
        want = sorted(rows, key=lambda i: (np.isnan(sb[i]), -sb[i] if not np.isnan(sb[i]) else 0, i))
        if [int(rb[i]) for i in want] != list(range(1, len(rows) + 1)):
            fail("group %d: ranks %s for scores %s" % (gid, rb[rows], sb[rows]))


if __name__ == "__main__":
    {"gen": gen, "check": check}[sys.argv[1]](*sys.argv[2:])
    print("ok")
