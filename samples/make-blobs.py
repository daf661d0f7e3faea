#!/usr/bin/env python3
"""make-blobs.py: writes blobs.tq and blobs-new.tq, the examples of
man/tq-train.1, with tests/lib/tqstream.py: 90 points of three classes in the
plane ("emb" f32 [90, 2] around (0, 0), (4, 0) and (2, 3); "y" i64 the class
0, 1 or 2), and three new points to score ("key" str, "emb" [3, 2])."""
import os
import random
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "lib"))
import tqstream as t  # noqa: E402

rng = random.Random(11)
centers = [(0, 0), (4, 0), (2, 3)]
pts, ys = [], []
for i in range(90):
    c = i % 3
    pts += [centers[c][0] + rng.gauss(0, 0.7), centers[c][1] + rng.gauss(0, 0.7)]
    ys.append(c)
with open(os.path.join(here, "blobs.tq"), "wb") as f:
    f.write(t.frame("emb", "f32", [90, 2], struct.pack("<180f", *pts)) +
            t.frame("y", "i64", [90], struct.pack("<90q", *ys)))
new = [0.2, -0.1, 3.9, 0.3, 2.1, 3.2]
with open(os.path.join(here, "blobs-new.tq"), "wb") as f:
    f.write(t.frame("key", "str", [3], t.str_payload(["near-0", "near-1", "near-2"])) +
            t.frame("emb", "f32", [3, 2], struct.pack("<6f", *new)))
