#!/usr/bin/python3
"""gelu-fit.py: derives the polynomial of lib/cpu/gelu.c.

erfc(t) = exp(-t^2) g(t), and g is smooth and slowly varying on t >= 0. On
u = 1 / (1 + t/2), t in [0, T], mapped to s in [-1, 1], g is fitted by a
Chebyshev series (weighted least squares for relative error), then turned
into plain power-series coefficients in s (gelu.c sums them in Estrin's order). Prints the C
table and the largest relative error of the fit on a fine grid.

Then the f32 tables of the AVX2 path: g on t in [0, TF] (TF = 12.5 / sqrt 2: x
down to -12.5, where x Phi(x) is still a normal f32) cut into NI equal
pieces, each fitted in its own z in [-1, 1] (degree DF), coefficients rounded
to f32; the error printed is that of the f32 coefficients, in double.
Needs numpy (Debian's python3-numpy)."""
import math

import numpy as np
from numpy.polynomial import chebyshev as cheb
from numpy.polynomial import polynomial as poly

T, A, DEG = 10.5, 0.5, 12
UMIN = 1 / (1 + A * T)


def g(t):
    return math.erfc(t) * math.exp(t * t)


def t_of_s(s):
    u = UMIN + (s + 1) / 2 * (1 - UMIN)
    return (1 / u - 1) / A


n = 4000
s = np.cos(np.pi * (np.arange(n) + 0.5) / n)
y = np.array([g(t) for t in t_of_s(s)])
p = cheb.cheb2poly(cheb.chebfit(s, y, DEG, w=1 / y))
grid = np.linspace(-1, 1, 400001)
exact = np.array([g(t) for t in t_of_s(grid)])
err = np.max(np.abs(poly.polyval(grid, p) / exact - 1))
print("/* T = %g, u = 1 / (1 + %g t), degree %d: max relative error %.2g */" % (T, A, DEG, err))
print("static const double erfc_poly[%d] = {" % (DEG + 1))
for c in p:
    print("    %.17g," % c)
print("};")

TF, NI, DF = 12.5 / math.sqrt(2), 8, 8
pieces = []
for j in range(NI):
    lo, hi = j * TF / NI, (j + 1) * TF / NI
    z = np.cos(np.pi * (np.arange(200) + 0.5) / 200)
    y = np.array([g(v) for v in lo + (z + 1) / 2 * (hi - lo)])
    pieces.append(cheb.cheb2poly(cheb.chebfit(z, y, DF, w=1 / y)).astype(np.float32))
zz = np.linspace(-1, 1, 20001)
worst = 0.0
for j, c in enumerate(pieces):
    lo, hi = j * TF / NI, (j + 1) * TF / NI
    exact = np.array([g(v) for v in lo + (zz + 1) / 2 * (hi - lo)])
    worst = max(worst, np.max(np.abs(poly.polyval(zz, c.astype(np.float64)) / exact - 1)))
print("/* t in [0, %.17g] in %d pieces, degree %d, f32 coefficients: max relative error %.2g */"
      % (TF, NI, DF, worst))
print("static const float erfc_piece[%d][%d] = {" % (DF + 1, NI))
for k in range(DF + 1):
    print("    {" + ", ".join("%.9g" % pieces[j][k] for j in range(NI)) + "},")
print("};")
