"""same_frames.py A.tq B.tq TOL: prints "ok" when two streams hold the same
frames in the same order, integer frames equal and float frames within TOL of
A's largest magnitude (max |a - b| / max |a|, in float64); else fails naming
the frame and its error. The cross-device comparisons of the Bats suites."""
import sys

import numpy as np

import tqstream

a = tqstream.read(open(sys.argv[1], "rb").read())
b = tqstream.read(open(sys.argv[2], "rb").read())
tol = float(sys.argv[3])
assert [f["name"] for f in a] == [f["name"] for f in b], "frames differ"
for fa, fb in zip(a, b):
    x, y = tqstream.to_numpy(fa), tqstream.to_numpy(fb)
    assert x.shape == y.shape, (fa["name"], x.shape, y.shape)
    if x.dtype.kind != "f":
        assert (x == y).all(), fa["name"]
        continue
    scale = max(1e-30, float(np.abs(x).max()))
    err = float(np.abs(x.astype(np.float64) - y).max()) / scale
    assert err <= tol, (fa["name"], err)
print("ok")
