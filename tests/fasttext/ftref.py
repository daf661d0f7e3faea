"""ftref.py: an independent reading of fastText models and sentence vectors in
numpy, for the tests. It sums float32 rows one at a time in fastText's order,
as fastText does (a float64 sum differs from fastText's own float32 one by more
than 1e-5 on long lines whose rows cancel). compare.py checks it against
`fasttext print-sentence-vectors` (which prints only 5 digits) and then our
embedder against it at full precision."""
import struct

import numpy as np

EOS = b"</s>"


def fnv(b):
    h = 2166136261
    for c in b:
        h ^= (c - 256 if c > 127 else c) & 0xFFFFFFFF
        h = (h * 16777619) & 0xFFFFFFFF
    return h


class Model:
    def __init__(self, path):
        d = open(path, "rb").read()
        self.off = 0

        def take(fmt):
            v = struct.unpack_from("<" + fmt, d, self.off)
            self.off += struct.calcsize("<" + fmt)
            return v if len(v) > 1 else v[0]

        magic, version = take("ii")
        assert magic == 793712314 and version in (11, 12)
        a = take("12i")
        take("d")
        self.dim, self.ngrams, self.model, self.bucket, self.minn, self.maxn = a[0], a[5], a[7], a[8], a[9], a[10]
        size, self.nwords, _, _, self.prune_size = take("iiiqq")
        self.ids, self.types = {}, []
        for i in range(size):
            end = d.index(b"\0", self.off)
            w = d[self.off:end]
            self.off = end + 1
            _, t = take("qb")
            self.ids[w] = i
            self.types.append(t)
        self.prune = {}
        for _ in range(max(self.prune_size, 0)):
            k, v = take("ii")
            self.prune[k] = v
        if take("?"):
            qnorm, m, n, codesize = take("?qqi")
            codes = np.frombuffer(d, np.uint8, codesize, self.off).reshape(m, -1)
            self.off += codesize
            cent, dsub, last = self.pq(take, d)
            rows = np.zeros((m, n), np.float32)
            for q in range(codes.shape[1]):
                w = last if q == codes.shape[1] - 1 else dsub
                c = cent[q * 256 * dsub:q * 256 * dsub + 256 * w].reshape(256, w)
                rows[:, q * dsub:q * dsub + w] = c[codes[:, q]]
            if qnorm:
                nc = np.frombuffer(d, np.uint8, m, self.off)
                self.off += m
                ncent, _, _ = self.pq(take, d)
                rows *= ncent[nc][:, None]  # float32 products, as fastText forms them
            self.rows = rows
        else:
            m, n = take("qq")
            self.rows = np.frombuffer(d, "<f4", m * n, self.off).reshape(m, n).astype(np.float32)

    def pq(self, take, d):
        dim, _, dsub, last = take("iiii")
        cent = np.frombuffer(d, "<f4", dim * 256, self.off).astype(np.float32)
        self.off += dim * 256 * 4
        return cent, dsub, last

    def bucket_row(self, h):
        if self.prune_size == 0:
            return []
        if self.prune_size > 0:
            return [self.nwords + self.prune[h]] if h in self.prune else []
        return [self.nwords + h]

    def subwords(self, w):
        if self.maxn <= 0 or w == EOS:
            return []
        s = b"<" + w + b">"
        # code point starts: bytes that are not UTF-8 continuation bytes
        out = []
        for i in range(len(s)):
            if s[i] & 0xC0 == 0x80:
                continue
            j, k = i, 0
            while j < len(s) and k < self.maxn:
                j += 1
                while j < len(s) and s[j] & 0xC0 == 0x80:
                    j += 1
                k += 1
                if k >= self.minn and not (k == 1 and (i == 0 or j == len(s))):
                    out += self.bucket_row(fnv(s[i:j]) % self.bucket)
        return out

    def word_rows(self, w):
        i = self.ids.get(w, -1)
        return ([i] if i >= 0 else []) + self.subwords(w)

    def mean(self, rows):
        acc = np.zeros(self.dim, np.float32)
        for r in rows:
            acc += self.rows[r]
        if rows:
            acc *= np.float32(1.0 / len(rows))
        return acc

    def sentence(self, line):
        """line: bytes without the newline."""
        if self.model == 3:
            toks = line.replace(b"\0", b" ").split()  # bytes.split: the same six separators
            rows, hashes = [], []
            for t in toks + [EOS]:
                i = self.ids.get(t, -1)
                label = self.types[i] == 1 if i >= 0 else t.startswith(b"__label__")
                if not label:
                    rows += ([i] if i >= 0 else []) + self.subwords(t)
                    h = fnv(t)
                    hashes.append(h - (1 << 32) if h >= 1 << 31 else h)
                if t == EOS:
                    break
            for a in range(len(hashes)):
                h = hashes[a] % (1 << 64)
                for b in range(a + 1, min(len(hashes), a + self.ngrams)):
                    h = (h * 116049371 + hashes[b]) % (1 << 64)
                    rows += self.bucket_row(h % self.bucket)
            return self.mean(rows)
        acc, count = np.zeros(self.dim, np.float32), 0
        for w in line.split():
            r = self.word_rows(w)
            if not r:
                continue
            v = self.mean(r)
            nv = np.float32(np.sqrt(np.dot(v, v)))
            if nv > 0:
                acc += v * np.float32(1.0 / nv)
                count += 1
        if count:
            acc *= np.float32(1.0 / count)
        return acc
