#!/usr/bin/env python3
"""make-hyps.py: writes the tq-score examples of man/tq-score.1 with
tests/lib/tqstream.py. hyps.tq: five candidates in two groups ("key" a1 a2 a3
b1 b2, "group" 1 1 1 2 2, "emb" f32 [5, 2]: 1 0, 0.6 0.8, 0 2, 3 3, -1 1);
ref.tq: one reference vector per group ("group" 2 1, "emb" 0 1, 1 0);
scorer.tq: a linear model, w = (-1, 1), b = 0."""
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "lib"))
import tqstream as t  # noqa: E402


def f32(name, rows, meta=None):
    flat = sum(rows, [])
    return t.frame(name, "f32", [len(rows), len(rows[0])], struct.pack("<%df" % len(flat), *flat),
                   meta=meta)


def i64(name, vals):
    return t.frame(name, "i64", [len(vals)], struct.pack("<%dq" % len(vals), *vals))


def write(name, data):
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)


write("hyps.tq", t.frame("key", "str", [5], t.str_payload(["a1", "a2", "a3", "b1", "b2"])) +
      i64("group", [1, 1, 1, 2, 2]) +
      f32("emb", [[1, 0], [0.6, 0.8], [0, 2], [3, 3], [-1, 1]]))
write("ref.tq", i64("group", [2, 1]) + f32("emb", [[0, 1], [1, 0]]))
write("scorer.tq", t.frame("model", "i64", [], struct.pack("<q", 1), meta={"kind": "linear"}) +
      t.frame("w", "f32", [2], struct.pack("<2f", -1, 1)) +
      t.frame("b", "f32", [], struct.pack("<f", 0)))
