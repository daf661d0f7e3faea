#!/usr/bin/python3
"""compare.py DRIVER WORKDIR: trains small fastText models with the real fasttext
binary on a seeded synthetic corpus (supervised and skipgram/cbow, with and
without subwords, word bigrams, quantized .ftz), then checks that DRIVER MODEL
(one vector per stdin line) matches `fasttext print-sentence-vectors`.

Two references: fastText's own output, which prints 5 significant digits, and
ftref.py, an independent numpy implementation of the same computation (float32
sums in fastText's order, as fastText does them).
- Each component of ftref's and of our vectors must lie within half a unit of
  the 5th printed digit of fastText's (times 1.01 for the decimal parse), plus
  1e-6 of the vector norm for summation order. A printed zero vector must be
  exactly zero.
- Our vectors must then match ftref's to 1e-5 relative (||ours - ref|| / ||ref||);
  the only differences left are numpy's dot product for the word norms.
"""
import os
import random
import subprocess
import sys
import functools

print = functools.partial(print, flush=True)

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ftref import Model  # noqa: E402

FASTTEXT = os.environ.get("FASTTEXT", "/usr/bin/fasttext")
TOL = 1e-5


def corpus(rng, n_lines, labels):
    syll = ["ka", "to", "ri", "mu", "sen", "ló", "über", "na", "qi", "zé", "日本", "語", "ß", "øy", "x"]
    vocab = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(400)]
    lines = []
    for _ in range(n_lines):
        words = [vocab[min(int(rng.expovariate(1 / 60)), len(vocab) - 1)] for _ in range(rng.randint(3, 14))]
        if labels:
            words = ["__label__" + rng.choice("abcd")] + words
        lines.append(" ".join(words))
    return vocab, lines


def test_lines(rng, vocab):
    known = lambda k: " ".join(rng.choice(vocab[:80]) for _ in range(k))
    lines = [
        known(6), known(1), known(12),
        "",                                    # empty: EOS only (supervised), zero (unsupervised)
        "   \t  ",                             # whitespace only
        "zzqqxv unseenword " + known(2),       # words not in the vocabulary
        "qqqqqqqq",                            # unknown only
        "über日本語 ßøy naïve café 😀 " + known(3),  # UTF-8 n-grams
        "a\tb\x0bc\x0cd\re " + known(2),        # every separator fastText knows
        "  leading and trailing   " + known(2) + "   ",
        "__label__a " + known(4),               # a label token is not a word
        "__label__zzz " + known(2),             # unknown label-looking token
        "x",
        "ka" * 60,                             # long word
        known(3000),                           # longer than fastText's training line cap
        known(5) + "\0" + known(3),            # NUL: a separator for supervised models only
        "\udce9\udc80\udcff ka\udc80",            # invalid UTF-8: raw bytes E9 80 FF, stray 80
    ]
    lines += [known(rng.randint(1, 20)) + (" oovword%d" % i if i % 3 == 0 else "") for i in range(60)]
    return lines


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, **kw)
    if r.returncode:
        sys.exit("command failed: %s\n%s" % (" ".join(cmd), r.stderr.decode(errors="replace")))
    return r.stdout


def vectors(out, dim):
    rows = [l.split() for l in out.decode().splitlines()]
    a = np.array([[float(x) for x in r] for r in rows], dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != dim:
        sys.exit("unexpected output shape %s (dim %d)" % (a.shape, dim))
    return a


def print_check(name, printed, vecs, lines, slack):
    """Each component of vecs within the print rounding of fastText's output."""
    for i, (r, o) in enumerate(zip(printed, vecs)):
        nr = np.linalg.norm(r)
        if nr == 0:
            if np.linalg.norm(o) != 0:
                return "%s: line %d: fastText printed zero, norm here %g" % (name, i, np.linalg.norm(o))
            continue
        exp = np.floor(np.log10(np.where(r != 0, np.abs(r), 1.0)))
        half = np.where(r != 0, 0.5 * 10.0 ** (exp - 4), 0.0)
        excess = np.abs(o - r) - (half * 1.01 + slack * nr)
        if (excess > 0).any():
            j = int(np.argmax(excess))
            return "%s: line %d %r: component %d is %.9g, fastText printed %.5g" % (
                name, i, lines[i][:40], j, o[j], r[j])
    return None


def compare(driver, model, lines, dim, threads):
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
    printed = vectors(run([FASTTEXT, "print-sentence-vectors", model], input=data), dim)
    ours = vectors(run([driver, model, str(threads)], input=data), dim)
    ref = Model(model)
    exact = np.array([ref.sentence(l.encode("utf-8", "surrogateescape")) for l in lines])
    name = os.path.basename(model)
    # both sum the same float32 rows in fastText's order: only print rounding
    # separates them from fastText's output
    for what, v, slack in (("numpy reference", exact, 1e-6), ("ours", ours, 1e-6)):
        if v.shape != printed.shape:
            return "%s: %d vectors from fastText, %d from the %s" % (name, len(printed), len(v), what)
        err = print_check(name + " (" + what + ")", printed, v, lines, slack)
        if err:
            return err
    worst = 0.0
    for i, (r, o) in enumerate(zip(exact, ours)):
        nr = np.linalg.norm(r)
        err = np.linalg.norm(o - r) / nr if nr else np.linalg.norm(o)
        worst = max(worst, err)
        if err > TOL:
            return "%s: line %d %r: relative error %.3g > %g against the numpy reference" % (
                name, i, lines[i][:40], err, TOL)
    print("ok %s: %d lines, within fastText's printed digits; worst relative error %.2g against numpy"
          % (name, len(lines), worst))
    return None


def main():
    driver, work = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    rng = random.Random(20261122)
    os.makedirs(work, exist_ok=True)
    vocab, sup = corpus(rng, 600, True)
    _, raw = corpus(rng, 600, False)
    with open(os.path.join(work, "sup.txt"), "w") as f:
        f.write("\n".join(sup) + "\n")
    # 300 labels: enough output rows for fasttext quantize -qout
    many = [" ".join(["__label__L%d" % rng.randrange(300)] + l.split()[1:]) for l in sup]
    with open(os.path.join(work, "many.txt"), "w") as f:
        f.write("\n".join(many) + "\n")
    with open(os.path.join(work, "raw.txt"), "w") as f:
        f.write("\n".join(raw) + "\n")
    common = ["-thread", "1", "-bucket", "5000", "-minCount", "1", "-seed", "7"]
    models = [  # name, command, input, extra args, dim
        ("sup-words", "supervised", "sup.txt", ["-dim", "16", "-epoch", "3"]),
        ("sup-sub-bigram", "supervised", "sup.txt", ["-dim", "24", "-epoch", "3", "-minn", "2", "-maxn", "4",
                                                      "-wordNgrams", "2"]),
        ("sup-many", "supervised", "many.txt", ["-dim", "12", "-epoch", "1", "-minn", "3", "-maxn", "3"]),
        ("sup-trigram", "supervised", "sup.txt", ["-dim", "16", "-epoch", "2", "-wordNgrams", "3"]),
        ("sg-sub", "skipgram", "raw.txt", ["-dim", "16", "-epoch", "1", "-minn", "2", "-maxn", "5"]),
        ("sg-nosub", "skipgram", "raw.txt", ["-dim", "16", "-epoch", "1", "-minn", "0", "-maxn", "0"]),
        ("cbow-sub", "cbow", "raw.txt", ["-dim", "20", "-epoch", "1"]),
    ]
    failures = []
    lines = test_lines(rng, vocab)
    dims = {}
    for name, cmd, inp, extra in models:
        out = os.path.join(work, name)
        run([FASTTEXT, cmd, "-input", os.path.join(work, inp), "-output", out, "-verbose", "0"] + common + extra)
        dims[name] = int(extra[extra.index("-dim") + 1])
        failures.append(compare(driver, out + ".bin", lines, dims[name], threads))
    # quantized: product-quantized input (dsub 2, and 3 which leaves a shorter last
    # sub-vector), norms quantized, a pruned dictionary (-cutoff), output quantized
    # (-qout, which needs 256 output rows: the 300-label model)
    for name, src, extra in [
        ("q-plain", "sup-sub-bigram", ["-dsub", "3"]),
        ("q-norm-cutoff", "sup-sub-bigram", ["-qnorm", "-cutoff", "300", "-retrain", "-epoch", "1", "-dsub", "2"]),
        ("q-trigram", "sup-trigram", ["-qnorm", "-dsub", "4"]),
        ("q-out", "sup-many", ["-qnorm", "-qout", "-dsub", "2"]),
    ]:
        base = os.path.join(work, src)
        train = os.path.join(work, "many.txt" if src == "sup-many" else "sup.txt")
        run([FASTTEXT, "quantize", "-input", train, "-output", base, "-thread", "1", "-verbose", "0"] + extra)
        dst = os.path.join(work, name + ".ftz")
        os.replace(base + ".ftz", dst)
        failures.append(compare(driver, dst, lines, dims[src], threads))
    failures = [f for f in failures if f]
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
