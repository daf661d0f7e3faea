"""st_raw.py: a safetensors file as raw tensors, for tests that edit a file
tq wrote (quantized-encoder.bats): load(path) -> (metadata, {name: (dtype,
shape, bytes)}), save(path, metadata, tensors) in the format's layout
(8-byte header length, the JSON header padded with spaces to 8 bytes, the
tensors' bytes, largest elements first)."""
import json
import struct

SIZE = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2, "I8": 1, "U8": 1}


def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    meta = h.pop("__metadata__", {})
    return meta, {k: (v["dtype"], v["shape"],
                      raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
                  for k, v in h.items()}


def save(path, meta, t):
    order = sorted(t, key=lambda k: -SIZE[t[k][0]])
    h, off = {"__metadata__": meta}, 0
    for k in order:
        h[k] = {"dtype": t[k][0], "shape": t[k][1], "data_offsets": [off, off + len(t[k][2])]}
        off += len(t[k][2])
    j = json.dumps(h).encode()
    j += b" " * (-len(j) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(j)) + j + b"".join(t[k][2] for k in order))
