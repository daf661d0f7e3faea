"""tokstress.py N SEED: prints the stress sentences for WordPiece, then N seeded
random lines mixing vocabulary words (some upper-cased) with runs of characters
from many scripts, accents, CJK, Hangul, punctuation, controls and odd spaces."""
import random
import sys

STRESS = [
    "Hello, World! This is a TEST of the tokenizer.",
    "\u00dcn\u00efc\u00f6d\u00e9 \u00e0ccents na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u00c5ngstr\u00f6m \u212b",
    "\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3 \u03a3\u039f\u03a6\u039f\u03a3 \u03a3 \u0391\u03a3. \u03c3\u03bf\u03c6\u03cc\u03c2",
    "\u4e2d\u6587\u5b57\u7b26\u6d4b\u8bd5 and \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 mixed \ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "emoji \U0001f600 test \U0001f680\U0001f680 ok",
    "tabs\tand  multiple   spaces",
    "control\x01char\x7f here\u200band zero width\u200djoiner\ufeff",
    "unbelievably antidisestablishmentarianism supercalifragilisticexpialidocious",
    "numbers 3.14159 1,000,000 $100 50% #hashtag @user",
    "don't won't it's \"quoted\" 'single' (paren) [bracket] {brace}",
    "\u0130stanbul \u01c5emal \u00df \ufb01 \ufb02",
    "word-with-hyphens and_underscores and/slashes",
    "a" * 120,
    "x y z",
    "",
    "  leading and trailing spaces   ",
    "line\u2028sep and para\u2029sep and nel\x85here",
    "\x00nul\ufffdreplacement",
    "[CLS] hello [SEP] world [MASK]",
    "x[SEP]y [sep] [[PAD]] [UNK]\u00e9[MASK]\u00c9 ab[CLS [MASK",
]
# BertTokenizer matches these in the raw text, case-sensitively
SPECIALS = ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "[sep]", "[Mask"]
POOLS = [range(0x20, 0x7f), range(0xa0, 0x250), range(0x370, 0x400), range(0x400, 0x530),
         range(0x590, 0x700), range(0x900, 0x980), range(0x1100, 0x1200), range(0x2000, 0x2070),
         range(0x3000, 0x3100), range(0x4e00, 0x4f00), range(0xac00, 0xac80), range(0xf900, 0xf980),
         range(0xfb00, 0xfb50), range(0xfe00, 0xff00), range(0x1f300, 0x1f700), range(0x300, 0x370),
         range(0x1d400, 0x1d500), [0x2028, 0x2029, 0x200b, 0x200d, 0xfeff, 0x9, 0xad, 0x3000, 0x1680]]
# U+061D became punctuation in Unicode 14; the tokenizers library is built on
# older tables, so the reference and we (Python 3.11's 14.0) differ on it alone.
SKIP = set(range(0xd800, 0xe000)) | {0x61d, 0xa, 0xd, 0xb, 0xc, 0x1c, 0x1d, 0x1e, 0x85}


def lines(n, seed, vocab):
    r = random.Random(seed)
    words = [w for w in vocab[1000:] if w and not w.startswith("[")]
    for s in STRESS:
        yield s
    for _ in range(n):
        parts = []
        for _ in range(r.randint(0, 14)):
            if r.random() < 0.04:
                parts.append(r.choice(SPECIALS))
            elif r.random() < 0.5:
                w = r.choice(words)
                parts.append(w.upper() if r.random() < 0.3 else w)
            else:
                p = r.choice(POOLS)
                parts.append("".join(chr(r.choice(p)) for _ in range(r.randint(1, 8))))
        s = (" " if r.random() < 0.7 else "").join(parts)
        yield "".join(c for c in s if ord(c) not in SKIP)


if __name__ == "__main__":
    vocab = open(sys.argv[3], encoding="utf-8").read().split("\n")
    out = open(sys.stdout.fileno(), "w", encoding="utf-8", errors="surrogatepass", closefd=False)
    for line in lines(int(sys.argv[1]), int(sys.argv[2]), vocab):
        out.write(line.replace("\n", " ") + "\n")
