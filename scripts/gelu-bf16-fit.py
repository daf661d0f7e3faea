#!/usr/bin/python3
"""gelu-bf16-fit.py: derives the table of lib/cpu/gelu_bf16.c.

Phi(t), the normal distribution function, on t in [0, T] cut into P equal
pieces, each fitted by a polynomial of degree D in the piece's own u in
[0, 1) (least squares reweighted towards the largest error, in double, then
rounded to f32). Prints the C table (row d: the coefficients of u^(D-d) of
the 16 pieces) and the largest error of Phi as gelu_bf16.c evaluates it
(Horner's rule in f32). Needs numpy (Debian's python3-numpy)."""
import math

import numpy as np

T, P, D = 5.5, 16, 4


def phi(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def main():
    table = np.zeros((D + 1, P), dtype=np.float32)
    worst = 0.0
    u = np.linspace(0, 1, 4001)
    for i in range(P):
        x = (i + u) * (T / P)
        y = np.array([phi(v) for v in x])
        v = np.vander(u, D + 1)  # highest power first, as Horner's rule takes them
        w = np.ones_like(u)
        for _ in range(40):
            c = np.linalg.lstsq(v * w[:, None], y * w, rcond=None)[0]
            e = np.abs(v @ c - y)
            w *= 1 + e / e.max()
        table[:, i] = c.astype(np.float32)
        p = np.full(u.shape, table[0, i], dtype=np.float32)
        uf = u.astype(np.float32)
        for d in range(1, D + 1):
            p = (p * uf + table[d, i]).astype(np.float32)
        worst = max(worst, float(np.abs(p.astype(np.float64) - y).max()))
    print("static const float phi_piece[%d][%d] = {" % (D + 1, P))
    for d in range(D + 1):
        print("    {" + ", ".join("%.9g" % c for c in table[d]) + "},")
    print("};")
    print("/* largest error of Phi: %.3g; 1 - Phi(T) = %.3g */" % (worst, 1 - phi(T)))


if __name__ == "__main__":
    main()
