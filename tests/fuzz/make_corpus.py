"""make_corpus.py DIR: seeds for fuzz_reader, written with tests/lib/tqstream.py
(independent of libtq): a few valid frames of each dtype, compressed ones, str
frames, concatenations, and a libFuzzer dictionary of the format's tokens."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tqstream as t  # noqa: E402


def pattern(n, seed):
    return bytes((i * 131 + seed * 17 + (i >> 3)) & 0xFF for i in range(n))


def seeds():
    s = {}
    shapes = {"f32": (3, 4), "f64": (2, 3), "f16": (5,), "bf16": (2, 2), "i8": (7,), "u8": (2, 5),
              "i16": (3,), "i32": (2, 2), "i64": (1, 3), "q8_0": (2, 32), "q4_0": (1, 64),
              "bit": (3, 10)}
    for k, (dt, dims) in enumerate(shapes.items()):
        if dt in ("q8_0", "q4_0"):
            size = dims[0] * dims[1] // 32 * (34 if dt == "q8_0" else 18)
        elif dt == "bit":
            size = dims[0] * ((dims[1] + 7) // 8)
        else:
            n = 1
            for d in dims:
                n *= d
            size = n * {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i8": 1, "u8": 1, "i16": 2,
                        "i32": 4, "i64": 8}[dt]
        raw = pattern(size, k)
        s["plain_" + dt] = t.frame(dt, dt, list(dims), raw, meta={"k": dt})
        s["zlib_" + dt] = t.frame(dt, dt, list(dims), raw, compress=True)
    words = ["", "a", "hello", "h\u00e9llo w\u00f6rld", "\u4e2d\u6587", "\U0001f600"]
    s["str"] = t.frame("key", "str", [len(words)], t.str_payload(words))
    s["str_zlib"] = t.frame("key", "str", [len(words)], t.str_payload(words), compress=True)
    s["str_empty"] = t.frame("key", "str", [0], struct.pack("<Q", 0))
    s["scalar"] = t.frame("s", "f64", [], struct.pack("<d", 1.5), meta={"a": "1", "b": "x=y"})
    s["zero_rows"] = t.frame("e", "f32", [0, 3], b"") + t.frame("e", "f32", [0, 3], b"", compress=True)
    # batches: key + emb, twice; and a stream of all the plain frames
    batch = (t.frame("key", "str", [2], t.str_payload(["x", "y"])) +
             t.frame("emb", "f32", [2, 4], pattern(32, 9)))
    s["batches"] = batch + batch
    s["all_plain"] = b"".join(v for k, v in sorted(s.items()) if k.startswith("plain_"))
    s["all_zlib"] = b"".join(v for k, v in sorted(s.items()) if k.startswith("zlib_"))
    # a few near misses, to start close to the checks
    good = s["plain_f32"]
    s["bad_crc"] = good[:20] + b"\0\0\0\0" + good[24:]
    s["truncated"] = good[:-10]
    s["big_rows"] = t.frame("b", "u8", [300, 100], pattern(30000, 3))
    return s


def dictionary():
    toks = [b"\x89TQF", b"\x01\x00", b"\x0a\x00", b"\x0b\x00", b"\x0c\x00", b"\x0d\x00",
            b"\x78\x9c", b"\x78\x01", b"\x78\xda", b"k=v\x00", b"\x40\x00\x00\x00",
            b"\x80\x00\x00\x00", b"\xff\xff\xff\xff\xff\xff\xff\xff", b"\x00" * 8]
    return "".join('"%s"\n' % "".join("\\x%02x" % c for c in tok) for tok in toks)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(out, name + ".tq"), "wb") as f:
            f.write(data)
    with open(os.path.join(out, "..", "tq.dict"), "w") as f:
        f.write(dictionary())


if __name__ == "__main__":
    main()
