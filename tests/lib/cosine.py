"""cosine.py A B MIN: compares two files of vectors (one a line) row by row and
fails (exit 1, naming the rows) unless they have the same rows and every
row's cosine similarity is at least MIN; prints the smallest cosine."""
import sys

import numpy as np

a = [np.array(l.split(), dtype=np.float64) for l in open(sys.argv[1])]
b = [np.array(l.split(), dtype=np.float64) for l in open(sys.argv[2])]
lo = float(sys.argv[3])
if len(a) != len(b) or not a:
    sys.exit("row counts differ: %d and %d" % (len(a), len(b)))
bad, worst = [], 1.0
for i, (x, y) in enumerate(zip(a, b)):
    if x.shape != y.shape:
        sys.exit("row %d: dims differ: %d and %d" % (i, x.size, y.size))
    c = float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))
    worst = min(worst, c)
    if not c >= lo:
        bad.append("row %d: cosine %.9f" % (i, c))
print("min cosine %.9f over %d rows" % (worst, len(a)))
if bad:
    sys.exit("\n".join(bad[:10]))
