"""hashembed.py: the hash:DIM embedder of tq-embed, written from the
specification in man/tq-embed.1 (section HASH EMBEDDER) as the tests' reference.
Works on Python str (code points) and counts features by their key strings."""
import math
import struct
from collections import Counter

WEIGHT = {"W": 1.0, "B": 1.0, "C": 0.5}

NONWORD_RANGES = [
    (0x80, 0xBF), (0xD7, 0xD7), (0xF7, 0xF7), (0x2000, 0x206F), (0x3000, 0x303F),
    (0xFF00, 0xFF0F), (0xFF1A, 0xFF20), (0xFF3B, 0xFF40), (0xFF5B, 0xFF65), (0xFFF0, 0xFFFF),
]


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) % (1 << 64)
    return h


def fmix64(h):
    m = (1 << 64) - 1
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & m
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & m
    h ^= h >> 33
    return h


def feature_hash(key):
    return fmix64(fnv1a64(key))


def is_word_char(ch):
    cp = ord(ch)
    if cp < 0x80:
        return ch.isascii() and ch.isalnum()
    return not any(lo <= cp <= hi for lo, hi in NONWORD_RANGES)


def words(text):
    out, cur = [], ""
    for ch in text + " ":
        if is_word_char(ch):
            cur += ch.lower() if "A" <= ch <= "Z" else ch
        elif cur:
            out.append(cur)
            cur = ""
    return out


def features(text):
    """The multiset of feature keys (bytes) of a document."""
    keys = []
    ws = words(text)
    for i, w in enumerate(ws):
        keys.append(b"W" + w.encode())
        if i > 0:
            keys.append(b"B" + ws[i - 1].encode() + b" " + w.encode())
        marked = "<" + w + ">"
        for start in range(len(marked)):
            for n in (3, 4, 5):
                if start + n <= len(marked):
                    keys.append(b"C" + marked[start:start + n].encode())
    return Counter(keys)


def bucket_sign(key, dim):
    h = feature_hash(key)
    return (h >> 32) % dim, (-1.0 if (h >> 31) & 1 else 1.0)


def embed(text, dim):
    """The float32 vector (as a list of Python floats) of one document."""
    acc = [0.0] * dim
    for key, tf in features(text).items():
        b, sign = bucket_sign(key, dim)
        acc[b] += sign * WEIGHT[chr(key[0])] * (1.0 + math.log(tf))
    norm = math.sqrt(sum(v * v for v in acc))
    if norm == 0.0:
        return [0.0] * dim
    return [struct.unpack("<f", struct.pack("<f", v / norm))[0] for v in acc]


if __name__ == "__main__":
    import sys
    dim = int(sys.argv[1])
    for line in sys.stdin.read().split("\n")[:-1]:
        print("\t".join("%.8g" % v for v in embed(line, dim)))
