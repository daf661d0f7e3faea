"""tqstream.py: an independent Python implementation of the TQ stream format
(man/tq-format.5), for the tests: it writes streams to feed the tools, reads
what they write, and crafts malformed streams. It shares no code with libtq."""
import struct
import zlib

MAGIC = b"\x89TQF"
VERSION = 1
DTYPES = {"f32": 1, "f64": 2, "f16": 3, "bf16": 4, "i8": 5, "u8": 6, "i16": 7,
          "i32": 8, "i64": 9, "str": 10, "q8_0": 11, "q4_0": 12, "bit": 13,
          "q2": 14}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
NUMPY = {"f32": "<f4", "f64": "<f8", "f16": "<f2", "i8": "i1", "u8": "u1",
         "i16": "<i2", "i32": "<i4", "i64": "<i8"}


def crc32c(data, crc=0):
    """Bitwise CRC-32C (Castagnoli, reflected 0x82F63B78): slow but obviously right."""
    crc ^= 0xFFFFFFFF
    table = _table()
    for b in data:
        crc = (crc >> 8) ^ table[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


_T = None


def _table():
    global _T
    if _T is None:
        _T = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
            _T.append(c)
    return _T


def align(n):
    return (n + 63) // 64 * 64


def str_payload(strings):
    data = [s.encode("utf-8") if isinstance(s, str) else s for s in strings]
    offs = [0]
    for d in data:
        offs.append(offs[-1] + len(d))
    return struct.pack("<%dQ" % len(offs), *offs) + b"".join(data)


def meta_bytes(meta):
    if not meta:
        return b""
    return b"".join(("%s=%s" % (k, v)).encode() + b"\0" for k, v in meta.items())


def frame(name, dtype, dims, payload, meta=None, compress=False, **override):
    """Bytes of one frame. `override` sets raw header fields to craft bad frames:
    magic, version, dtype_code, rank, flags, name_len, meta_len, header_len,
    payload_crc, stored_size, raw_size, reserved, header_crc, pad_byte."""
    raw = bytes(payload)
    stored = zlib.compress(raw, 6) if compress else raw
    nb = name.encode() if isinstance(name, str) else name
    mb = meta_bytes(meta) if isinstance(meta, dict) or meta is None else meta
    rank = len(dims)
    f = dict(magic=MAGIC, version=VERSION, dtype_code=DTYPES[dtype] if isinstance(dtype, str) else dtype,
             rank=rank, flags=1 if compress else 0, name_len=len(nb), meta_len=len(mb),
             header_len=align(48 + 8 * rank + len(nb) + len(mb)),
             payload_crc=crc32c(stored), stored_size=len(stored), raw_size=len(raw),
             reserved=0, header_crc=None, pad_byte=0)
    f.update(override)
    body = struct.pack("<%dQ" % rank, *dims) + nb + mb
    fixed = (f["magic"] + struct.pack("<HHBBHIII", f["version"], f["dtype_code"], f["rank"],
                                      f["flags"], f["name_len"], f["meta_len"],
                                      f["header_len"], f["payload_crc"])
             + struct.pack("<QQI", f["stored_size"], f["raw_size"], f["reserved"]))
    hl = f["header_len"]
    rest = body + b"\0" * max(0, hl - 48 - len(body))
    if f["header_crc"] is None:
        f["header_crc"] = crc32c(rest, crc32c(fixed))
    hdr = fixed + struct.pack("<I", f["header_crc"]) + rest
    pad = bytes([f["pad_byte"]]) * (align(len(stored)) - len(stored))
    return hdr + stored + pad


def array_frame(name, arr, meta=None, compress=False, dtype=None):
    """A frame from a numpy array (dtype from the array unless given)."""
    import numpy as np
    if dtype is None:
        inv = {np.dtype(v).str.lstrip("<|"): k for k, v in NUMPY.items()}
        dtype = inv[arr.dtype.str.lstrip("<|")]
    a = np.ascontiguousarray(arr)
    return frame(name, dtype, list(a.shape), a.astype(a.dtype.newbyteorder("<")).tobytes(),
                 meta=meta, compress=compress)


def read(data):
    """Parses a whole stream; returns a list of dicts (name, dtype, dims, meta, raw,
    flags). Raises ValueError on anything tq-format.5 forbids."""
    out, off = [], 0
    while off < len(data):
        if data[off:off + 4] != MAGIC:
            raise ValueError("bad magic at %d" % off)
        (ver, dt, rank, flags, nl, ml, hl, pcrc) = struct.unpack_from("<HHBBHIII", data, off + 4)
        stored_size, raw_size, reserved, hcrc = struct.unpack_from("<QQII", data, off + 24)
        hdr = data[off:off + hl]
        if crc32c(hdr[48:], crc32c(hdr[:44])) != hcrc:
            raise ValueError("header crc at %d" % off)
        dims = list(struct.unpack_from("<%dQ" % rank, data, off + 48))
        p = off + 48 + 8 * rank
        name = data[p:p + nl].decode()
        meta = {}
        for e in data[p + nl:p + nl + ml].split(b"\0")[:-1]:
            k, v = e.decode().split("=", 1)
            meta[k] = v
        stored = data[off + hl:off + hl + stored_size]
        if crc32c(stored) != pcrc:
            raise ValueError("payload crc at %d" % off)
        raw = zlib.decompress(stored) if flags & 1 else stored
        if len(raw) != raw_size:
            raise ValueError("raw size at %d" % off)
        out.append(dict(name=name, dtype=DTYPE_NAMES[dt], dims=dims, meta=meta, raw=raw,
                        flags=flags))
        off += hl + align(stored_size)
    return out


def to_numpy(fr):
    import numpy as np
    if fr["dtype"] == "str":
        n = fr["dims"][0]
        offs = struct.unpack_from("<%dQ" % (n + 1), fr["raw"])
        base = 8 * (n + 1)
        return [fr["raw"][base + offs[i]:base + offs[i + 1]].decode() for i in range(n)]
    if fr["dtype"] == "bf16":
        u = np.frombuffer(fr["raw"], dtype="<u2").astype(np.uint32) << 16
        return u.view(np.float32).reshape(fr["dims"])
    return np.frombuffer(fr["raw"], dtype=NUMPY[fr["dtype"]]).reshape(fr["dims"])
