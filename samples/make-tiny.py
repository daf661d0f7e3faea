#!/usr/bin/env python3
"""make-tiny.py: writes samples/tiny.tq, the example stream of tq-format.5, with
tests/lib/tqstream.py (the Python implementation of the format). Two frames:
"key", str [3]: apple banana cherry; "emb", f32 [3, 4] with metadata
model=demo: the rows 1 0 0 0, 0 2 0 0, 0 0 3 0."""
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "lib"))
import tqstream as t  # noqa: E402

rows = [[1, 0, 0, 0], [0, 2, 0, 0], [0, 0, 3, 0]]
data = (t.frame("key", "str", [3], t.str_payload(["apple", "banana", "cherry"])) +
        t.frame("emb", "f32", [3, 4], struct.pack("<12f", *sum(rows, [])),
                meta={"model": "demo"}))
with open(os.path.join(here, "tiny.tq"), "wb") as f:
    f.write(data)
