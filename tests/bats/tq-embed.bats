#!/usr/bin/env bats
# tq-embed: the hash embedder against tests/lib/hashembed.py (written from the
# spec in man/tq-embed.1, not from the C), near-duplicate retrieval, the input
# modes, the line policies, batches, dtypes, determinism and errors. Streams are
# parsed with tests/lib/tqstream.py, independent of libtq.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    cat > emb.py <<'EOF'
import sys
import numpy as np
import tqstream as tq
import hashembed

def load(path, dtype="f32"):
    """keys (list) and emb (float32 array) of a tq-embed stream, checking that
    every batch is a "key" frame then an "emb" frame of as many rows."""
    frames = tq.read(open(path, "rb").read())
    assert len(frames) % 2 == 0, [f["name"] for f in frames]
    keys, rows, sizes = [], [], []
    for k, e in zip(frames[0::2], frames[1::2]):
        assert k["name"] == "key" and e["name"] == "emb", (k["name"], e["name"])
        assert e["dtype"] == dtype, e["dtype"]
        assert k["dims"][0] == e["dims"][0]
        kv = tq.to_numpy(k)
        keys += list(kv) if isinstance(kv, list) else [int(x) for x in kv]
        rows.append(tq.to_numpy(e).astype(np.float32))
        sizes.append(e["dims"][0])
    emb = np.concatenate(rows) if rows else np.zeros((0, 0), np.float32)
    return keys, emb, sizes, frames

def ref(texts, dim):
    return np.array([hashembed.embed(t, dim) for t in texts], dtype=np.float64).reshape(len(texts), dim)
EOF
}

# Texts that stress the tokenizer: Unicode letters and punctuation, digits, case,
# repeats (tf), CJK without spaces, fullwidth forms, symbols, a long line.
stress_texts() {
    py - <<'EOF'
import random
rng = random.Random(3)
t = [
    "a", "Hello, World! hello", "hello hello hello hello world",
    "Ünïcödé café naïve Straße ΣΟΦΙΑ σοφία",
    "東京都に住んでいます。今日は晴れ！",
    "Ｆｕｌｌｗｉｄｔｈ：ＡＢＣ（１２３）",
    "2026-11-22 10:30 v1.2.3 x86_64 $100 50% #tag @user",
    "“quotes” — dashes – and… ellipses «guillemets» ¿qué? ¡sí!",
    "a×b÷c ±1 ©2026 ®tm ½ ¼ µ",
    "tabs\tinside\tthe  line   and   spaces",
    "emoji 😀 🎉 mixed😀text", "x", "ab", "abc", "I", "...!!!???", "   ",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
    "l'été d'amour, rock'n'roll e-mail co-operate",
    "Ǆ ǅ ǆ İstanbul ı",
    " ".join(rng.choice(["alpha", "beta", "gamma", "δέλτα", "數據", "x1", "Z"]) for _ in range(3000)),
]
print("\n".join(t))
EOF
}

@test "hash vectors equal the Python reference of the spec (several DIM)" {
    stress_texts > docs.txt
    for dim in 1 8 384 1000; do
        tq-embed -m hash:$dim --on-empty keep docs.txt > out.tq
        py - "$dim" <<'EOF'
import sys
sys.path.insert(0, ".")
from emb import *
dim = int(sys.argv[1])
texts = open("docs.txt", encoding="utf-8").read().split("\n")[:-1]
keys, got, _, frames = load("out.tq")
assert keys == list(range(len(texts))), keys
assert got.shape == (len(texts), dim), got.shape
want = ref(texts, dim)
# both round one float64 quotient to f32: 1e-6 covers the half-ulp and the
# different summation orders (error ~1e-16) with room to spare
err = np.abs(got - want).max()
assert err <= 1e-6, (dim, err, np.abs(got - want).max(axis=1))
norms = np.linalg.norm(want, axis=1)
assert (np.abs(norms[norms > 0] - 1) < 1e-6).all()
assert frames[1]["meta"]["model"] == "hash:%d" % dim
EOF
    done
}

@test "the default model is hash:384 and an empty document gives the zero vector" {
    printf 'one\n\n...\n' > d.txt
    tq-embed --on-empty keep d.txt > out.tq
    py - <<'EOF'
import sys
sys.path.insert(0, ".")
from emb import *
keys, got, _, fr = load("out.tq")
assert fr[1]["meta"]["model"] == "hash:384"
assert keys == [0, 1, 2] and got.shape == (3, 384)
assert (got[1] == 0).all() and (got[2] == 0).all()
assert np.abs(got[0] - ref(["one"], 384)[0]).max() <= 1e-6
EOF
}

@test "near-duplicates: every edited copy is nearest to its original" {
    py - <<'EOF'
import random
rng = random.Random(11)
# 1000 words of 3 to 9 random letters; sentences of 8 to 14 of them
vocab = sorted({"".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
                for _ in range(1000)})
orig = set()
while len(orig) < 200:
    w = rng.sample(vocab, rng.randint(8, 14))
    orig.add(" ".join(w).capitalize() + ".")
orig = sorted(orig)
def edit(s, k):
    w = s.rstrip(".").split()
    if k == 0:   # a word changed
        i = rng.randrange(len(w)); w[i] = rng.choice(vocab)
        return " ".join(w) + "."
    if k == 1:   # a typo: two letters swapped
        i = rng.randrange(len(w)); x = w[i]
        if len(x) > 3:
            j = rng.randrange(len(x) - 1); x = x[:j] + x[j + 1] + x[j] + x[j + 2:]
        else:
            x = x + "s"
        w[i] = x
        return " ".join(w) + "."
    return (" ".join(w)).upper() + "!!"   # punctuation and case
with open("docs.txt", "w") as f:
    for s in orig:
        f.write(s + "\n")
    for i, s in enumerate(orig):
        f.write(edit(s, i % 3) + "\n")
EOF
    tq-embed docs.txt > out.tq
    py - <<'EOF'
import sys
sys.path.insert(0, ".")
from emb import *
keys, e, _, _ = load("out.tq")
n = 200
assert e.shape[0] == 2 * n
orig, copy = e[:n].astype(np.float64), e[n:].astype(np.float64)
cos = copy @ orig.T            # rows are unit vectors
own = np.diag(cos)
other = cos.copy(); np.fill_diagonal(other, -np.inf)
margin = own - other.max(axis=1)
print("own cosine: min %.3f median %.3f; best other: max %.3f median %.3f; margin min %.3f median %.3f"
      % (own.min(), np.median(own), other.max(), np.median(other.max(axis=1)), margin.min(), np.median(margin)))
assert (margin > 0).all(), np.flatnonzero(margin <= 0)
# a clear margin: the worst copy is still clearly closer to its original than to
# any other original
assert margin.min() > 0.2, margin.min()
assert np.median(margin) > 0.5, np.median(margin)
EOF
}

@test "--tsv: ids as str keys, text after the first TAB" {
    printf 'doc-1\tHello world\nx\tsecond\tline with tab\n\temptyid\n' > d.tsv
    tq-embed --tsv -m hash:64 d.tsv > out.tq
    py - <<'EOF'
import sys
sys.path.insert(0, ".")
from emb import *
keys, e, _, _ = load("out.tq")
assert keys == ["doc-1", "x", ""], keys
want = ref(["Hello world", "second\tline with tab", "emptyid"], 64)
assert np.abs(e - want).max() <= 1e-6
EOF
    printf 'no tab here\n' > bad.tsv
    run -65 tq-embed --tsv bad.tsv
    assert_output --partial "line 1"
}

@test "--jsonl --field --id-field: escapes, surrogate pairs, string and integer ids" {
    py - <<'EOF'
import json
rows = [
    {"id": "a\"b", "body": "Tab\there \"quoted\" back\\slash \u00e9 \ud83d\ude00 \u6771\u4eac", "n": [1, {"x": None}]},
    {"body": "second", "id": 42, "other": 1.5e3},
    {"id": -7, "body": "line\nbreak \/ slash"},
]
with open("d.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r, ensure_ascii=True) + "\n")
    f.write('  {"body" : "raw UTF-8 é 東", "id":"u"}  \n')
EOF
    tq-embed --jsonl --field body --id-field id -m hash:32 d.jsonl > out.tq
    py - <<'EOF'
import sys, json
sys.path.insert(0, ".")
from emb import *
keys, e, _, _ = load("out.tq")
lines = [json.loads(l) for l in open("d.jsonl", encoding="utf-8")]
assert keys == [str(l["id"]) for l in lines], keys
want = ref([l["body"] for l in lines], 32)
assert np.abs(e - want).max() <= 1e-6
EOF
    # without --id-field: line numbers; default field "text"
    printf '{"text":"a"}\n{"text":"b"}\n' | tq-embed --jsonl -m hash:4 > out2.tq
    py -c 'import sys; sys.path.insert(0,"."); from emb import *; assert load("out2.tq")[0] == [0, 1]'
    for bad in '{"text":"a\ud800"}' '{"text":"a\q"}' '{"text":1}' '{"body":"x"}' '{"text":"a"} x' '{"text":"a",}' '[1]'; do
        printf '{"text":"ok"}\n%s\n' "$bad" > bad.jsonl
        run -65 tq-embed --jsonl bad.jsonl
        assert_output --regexp '^tq-embed: error: bad.jsonl: line 2: '
    done
    printf '{"text":"a","id":1.5}\n' > badid.jsonl
    run -65 tq-embed --jsonl --id-field id badid.jsonl
    assert_output --partial "line 1"
}

@test "--batch 7 on 50 lines: keys stay aligned with their rows across batches" {
    py -c 'print("\n".join("line number %d of fifty" % i for i in range(50)))' > d.txt
    tq-embed --batch 7 -m hash:16 d.txt > out.tq
    py - <<'EOF'
import sys
sys.path.insert(0, ".")
from emb import *
keys, e, sizes, _ = load("out.tq")
assert sizes == [7] * 7 + [1], sizes
assert keys == list(range(50))
texts = open("d.txt").read().split("\n")[:-1]
assert np.abs(e - ref(texts, 16)).max() <= 1e-6
EOF
}

@test "line-number keys stay the input line numbers when lines are skipped" {
    printf 'zero\n\none\n\xff\xfe bad\n\ntwo\n%s\nthree' "$(head -c 100 /dev/zero | tr '\0' a)" > d.txt
    tq-embed --batch 2 --on-invalid skip --on-long skip --max-line 50 -m hash:8 d.txt > out.tq
    py - <<'EOF'
import sys
sys.path.insert(0, ".")
from emb import *
keys, e, _, _ = load("out.tq")
assert keys == [0, 2, 5, 7], keys
assert np.abs(e - ref(["zero", "one", "two", "three"], 8)).max() <= 1e-6
EOF
}

@test "--on-empty, --on-invalid, --on-long: every policy, and -v counts" {
    printf 'a\n\nb\xffc\n%s\nd\r\n' "$(printf 'é%.0s' $(seq 30))" > d.txt   # line 4: 60 bytes
    # defaults: skip empty, replace invalid, truncate long (at a code point start)
    run --separate-stderr tq-embed -v --max-line 9 -m hash:16 -o def.tq d.txt
    assert_success
    [[ "$stderr" == *"5 lines: 4 rows embedded, 1 empty skipped, 0 invalid UTF-8 skipped, 1 repaired, 0 over-long skipped, 1 truncated"* ]]
    tq-embed --on-empty keep --on-invalid skip --on-long skip --max-line 9 -m hash:16 d.txt > alt.tq
    py - <<'EOF'
import sys
sys.path.insert(0, ".")
from emb import *
keys, e, _, _ = load("def.tq")
assert keys == [0, 2, 3, 4], keys
want = ref(["a", "b\ufffdc", "éééé", "d"], 16)   # 9 bytes cut back to 8: four é
assert np.abs(e - want).max() <= 1e-6
keys, e, _, _ = load("alt.tq")
assert keys == [0, 1, 4], keys
assert np.abs(e - ref(["a", "", "d"], 16)).max() <= 1e-6
EOF
    run -65 tq-embed --on-empty error d.txt
    assert_output "tq-embed: error: d.txt: line 2: empty document"
    run -65 tq-embed --on-invalid error d.txt
    assert_output "tq-embed: error: d.txt: line 3: invalid UTF-8"
    run -65 tq-embed --on-long error --max-line 9 d.txt
    assert_output "tq-embed: error: d.txt: line 4: longer than --max-line"
    # a warning without -v when text was changed or dropped, silence with -q
    run --separate-stderr tq-embed --max-line 9 -o /dev/null d.txt
    [[ "$stderr" == *"warning: 1 lines with invalid UTF-8"* ]]
    run --separate-stderr tq-embed -q --max-line 9 -o /dev/null d.txt
    [ -z "$stderr" ]
}

@test "--dtype f16 and bf16 equal numpy's rounding of the f32 output" {
    stress_texts > docs.txt
    tq-embed -m hash:128 docs.txt > f32.tq
    tq-embed -m hash:128 --dtype f16 docs.txt > f16.tq
    tq-embed -m hash:128 --dtype bf16 docs.txt > bf16.tq
    py - <<'EOF'
import sys
sys.path.insert(0, ".")
from emb import *
k32, e32, _, _ = load("f32.tq")
k16, e16, _, fr = load("f16.tq", "f16")
assert k16 == k32
h = np.frombuffer(b"".join(f["raw"] for f in fr[1::2]), dtype="<f2").reshape(e32.shape)
assert (h.view(np.uint16) == e32.astype(np.float16).view(np.uint16)).all()
kb, eb, _, fr = load("bf16.tq", "bf16")
u = e32.view(np.uint32).astype(np.uint64)
want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)   # nearest even
got = np.frombuffer(b"".join(f["raw"] for f in fr[1::2]), dtype="<u2").reshape(e32.shape)
assert (got == want).all()
EOF
}

# --precision bf16/f16 rounds a model folder's products where the device
# multiplies such operands as such: CUDA and HIP (gpu.bats), and bf16 on a CPU
# with AVX512-BF16 (weights and activations rounded to bf16, VDPBF16PS sums
# in f32). There the rows hold to the man page's cosine 0.999 with f32's (see
# gpu.bats for why that bound: bf16 through this model measures ~0.99999, a
# wrong operand or row falls under 0.85), differ from f32's bytes (the
# products did change) and keep their bytes at any thread count. Elsewhere the
# products stay f32, so the bytes are f32's and -v says so once. Embedders
# without products (hash:, fastText) take the option and say nothing.
cpu_has_bf16() { grep -qw avx512_bf16 /proc/cpuinfo && grep -qw avx512f /proc/cpuinfo; }

@test "--precision bf16/f16 on the CPU: bf16 products with AVX512-BF16 (cosine 0.999), else f32's bytes and one -v note; hash: ignores it; int4 is exit 2" {
    "$PY" -c 'import torch' 2>/dev/null || skip "python3-torch is not installed (make_bert.py needs it)"
    py "$TESTS_DIR/lib/make_bert.py" m --pool mean --normalize --max-seq 32 --seed 11
    stress_texts > docs.txt
    tq-embed -m m --device cpu --batch 7 -o f32.tq docs.txt
    for p in bf16 f16; do
        run --separate-stderr tq-embed -v -m m --device cpu --batch 7 --precision "$p" -o "$p.tq" docs.txt
        assert_success
        if [ "$p" = bf16 ] && cpu_has_bf16; then
            [[ "$stderr" != *"f32 products on"* ]] || fail "bf16 with AVX512-BF16: a fallback note: $stderr"
            ! cmp -s f32.tq bf16.tq || fail "bf16 with AVX512-BF16: f32's bytes (the products were not bf16)"
            tq-cat -t tsv --name emb f32.tq | tail -n +2 | tr '\t' ' ' > f32.txt
            tq-cat -t tsv --name emb bf16.tq | tail -n +2 | tr '\t' ' ' > bf16.txt
            [ "$(wc -l < bf16.txt)" -eq "$(wc -l < f32.txt)" ]
            run py "$TESTS_DIR/lib/cosine.py" f32.txt bf16.txt 0.999
            assert_success
            tq-embed -m m --device cpu --batch 7 --threads 1 --precision bf16 -o t1.tq docs.txt
            cmp bf16.tq t1.tq
        else
            cmp f32.tq "$p.tq"
            [ "$(grep -c -- "--precision $p: f32 products on cpu" <<< "$stderr")" -eq 1 ] ||
                fail "$p: not one fallback note: $stderr"
        fi
        run --separate-stderr tq-embed -m m --device cpu --precision "$p" -o q.tq docs.txt
        assert_success
        [ -z "$stderr" ] || fail "$p: stderr without -v: $stderr"
    done
    # f32 asked for: nothing to say
    run --separate-stderr tq-embed -v -m m --device cpu --batch 7 --precision f32 -o p32.tq docs.txt
    assert_success
    cmp f32.tq p32.tq
    [[ "$stderr" != *"f32 products"* ]] || fail "a note for f32: $stderr"
    # hash: no products: the same bytes, no note
    tq-embed -m hash:64 -o h32.tq docs.txt
    run --separate-stderr tq-embed -v -m hash:64 --precision bf16 -o h16.tq docs.txt
    assert_success
    cmp h32.tq h16.tq
    [[ "$stderr" != *"precision"* ]] || fail "a note for hash: $stderr"
    # not a choice: a usage error, one line, no output
    run -2 --separate-stderr tq-embed -m m --precision int4 -o i.tq docs.txt
    [ "$stderr" = "tq-embed: error: --precision does not know 'int4'; see 'tq-embed --help'" ] ||
        fail "int4: $stderr"
    [ ! -e i.tq ]
}

@test "the thread count does not change a byte of the output" {
    stress_texts > docs.txt
    for i in 1 2 3 4 5 6 7 8; do cat docs.txt; done > big.txt
    tq-embed --threads 1 --batch 100 big.txt > t1.tq
    tq-embed --threads 2 --batch 100 big.txt > t2.tq
    TQ_THREADS=2 tq-embed --batch 100 big.txt > t3.tq
    cmp t1.tq t2.tq
    cmp t1.tq t3.tq
    [ "$(stat -c %s t1.tq)" -gt 100000 ]
}

@test "bad options exit 2, a missing input or model 66, a bad DIM 2" {
    run -2 tq-embed --batch 0
    assert_output --partial "tq-embed: error: --batch"
    run -2 tq-embed --on-empty sometimes
    run -2 tq-embed --dtype f64
    run -2 tq-embed --tsv --jsonl
    run -2 tq-embed --field x
    run -2 tq-embed --nope
    run -2 tq-embed -m hash:0 /dev/null
    run -2 tq-embed -m hash:65537 /dev/null
    run -2 tq-embed -m hash:12x /dev/null
    run -66 tq-embed -m /nonexistent/model.bin /dev/null
    assert_output --partial "/nonexistent/model.bin"
    run -66 tq-embed -o out.tq no-such-file.txt
    assert_output --partial "no-such-file.txt: cannot open"
    [ ! -e out.tq ]
    run -0 tq-embed --help
    assert_output --partial "--on-invalid"
}

@test "memory stays bounded by the batch on a big input" {
    [ -x /usr/bin/time ] || skip "GNU time is not installed (make deps-test installs it)"
    py - <<'EOF'
import random
rng = random.Random(5)
w = ["w%d" % i for i in range(5000)]
with open("big.txt", "w") as f:
    for i in range(400000):   # ~ 60 MB
        f.write(" ".join(rng.choices(w, k=rng.randint(10, 30))) + "\n")
EOF
    # under make SAN=1, ASan's quarantine would hold freed batches: turn it off
    export ASAN_OPTIONS="quarantine_size_mb=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    rss() { /usr/bin/time -v "$@" 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p'; }
    head -n 4000 big.txt > small.txt
    small=$(rss tq-embed --batch 256 -o /dev/null small.txt)
    big=$(rss tq-embed --batch 256 -o /dev/null big.txt)
    echo "small $small KiB, big $big KiB"
    # 100x the input, same batch: within 8 MiB of the small run (not ~60 MB more)
    [ "$big" -lt $((small + 8192)) ]
}

@test "the test vectors of the man page agree with the Python reference" {
    py - "$ROOT_DIR/man/tq-embed.1" <<'EOF'
import sys
import hashembed
text = open(sys.argv[1], encoding="utf-8").read()
table = text.split(".TS\n")[1].split(".TE\n")[0].splitlines()[2:]
assert len(table) >= 8, table
for row in table:
    key, fnv, h, bs = row.split("\t")
    k = b"" if key == "(empty)" else key.encode()
    if fnv != "\\&":
        assert "%016x" % hashembed.fnv1a64(k) == fnv, (key, fnv)
    assert "%016x" % hashembed.feature_hash(k) == h, (key, h)
    b, s = hashembed.bucket_sign(k, 8)
    assert bs == "%d, %s" % (b, "+" if s > 0 else "\\-"), (key, bs)
EOF
}

@test "binary output to a terminal is refused; -o leaves no file after a refused line" {
    command -v script >/dev/null || skip "script(1) from util-linux is not installed"
    run script -qec "$TQ_BIN/tq-embed < /dev/null" /dev/null
    [ "$status" -eq 2 ]
    [[ "$output" == *"refusing to write a binary stream to a terminal"* ]]
    printf 'good\n\xff\n' > d.txt
    run -65 tq-embed --on-invalid error -o out.tq d.txt
    [ ! -e out.tq ]
    [ -z "$(ls -A . | grep -v -e '^d.txt$' -e '^emb.py$')" ]
}

# tq-embed.1 (.VEC WORD VECTORS): a value that is not a finite f32 number is
# refused with its line, exit 65, and no output file.
@test ".vec word vectors holding NaN, an infinity or a value beyond f32: exit 65 naming the line" {
    cd "$BATS_TEST_TMPDIR"
    for v in nan -inf 1e300; do
        printf 'cat 1 2\ndog 2 %s\n' "$v" > w.vec
        run --separate-stderr tq-embed -m w.vec -o e.tq <<<"cat dog"
        [ "$status" -eq 65 ] && [ ! -e e.tq ] || fail "$v: exit $status: $stderr"
        [ "$stderr" = "tq-embed: error: w.vec: line 2: value 2 is not a finite number: \"$v\"" ] || fail "$stderr"
    done
    printf 'cat 1 2\ndog 2 3\n' > w.vec
    run tq-embed -m w.vec -o e.tq <<<"cat dog"
    assert_success
}

@test "-m NAME that is no folder: one line saying what -m takes (66); ORG/NAME from the Hugging Face cache" {
    takes="-m takes a model folder (modules.json, config.json, vocab.txt, model.safetensors...), a fastText .bin/.ftz or .vec file, or hash:DIM"
    export HF_HUB_CACHE="$BATS_TEST_TMPDIR/hub"
    mkdir -p "$HF_HUB_CACHE"
    run --separate-stderr tq-embed -m sentence-transformers/all-MiniLM-L6-v2 </dev/null
    [ "$status" -eq 66 ] && [ -z "$output" ]
    [ "$stderr" = "tq-embed: error: -m sentence-transformers/all-MiniLM-L6-v2: no such folder (nor in the Hugging Face cache); $takes" ]
    run --separate-stderr tq-embed -m ./no/model </dev/null
    [ "$status" -eq 66 ] && [ -z "$output" ]
    [ "$stderr" = "tq-embed: error: -m ./no/model: no such folder; $takes" ]
    run --separate-stderr tq-embed -m wiki.en.bin </dev/null
    [ "$status" -eq 66 ] && [ -z "$output" ]
    [ "$stderr" = "tq-embed: error: -m wiki.en.bin: no such file; $takes" ]
    run -0 tq-embed --help
    assert_output --partial "model folder of"
    assert_output --partial "Hugging Face cache"
    # the cache's layout: models--ORG--NAME/snapshots/REV, REV from refs/main
    snap="$HF_HUB_CACHE/models--org--tiny/snapshots/abc123"
    mkdir -p "$snap" "$HF_HUB_CACHE/models--org--tiny/snapshots/old" "$HF_HUB_CACHE/models--org--tiny/refs"
    echo abc123 > "$HF_HUB_CACHE/models--org--tiny/refs/main"
    run --separate-stderr tq-embed -m org/tiny </dev/null
    [ "$status" -eq 66 ] && [ "$stderr" = "tq-embed: error: $snap/modules.json: cannot open: No such file or directory" ] ||
        fail "refs/main not followed: $status: $stderr"
    # HF_HOME/hub, and the one snapshot without refs/main
    unset HF_HUB_CACHE
    export HF_HOME="$BATS_TEST_TMPDIR/hf"
    mkdir -p "$HF_HOME/hub/models--solo/snapshots/r1"
    run --separate-stderr tq-embed -m solo </dev/null
    [ "$status" -eq 66 ] && [ "$stderr" = "tq-embed: error: $HF_HOME/hub/models--solo/snapshots/r1/modules.json: cannot open: No such file or directory" ] ||
        fail "HF_HOME not followed: $status: $stderr"
    # a real model in the cache embeds as its folder does
    "$PY" -c 'import torch' 2>/dev/null || return 0
    py "$TESTS_DIR/lib/make_bert.py" "$HF_HOME/hub/models--solo/snapshots/r1" --max-seq 16
    printf 'hello world\nthe cat\n' > in.txt
    tq-embed -m "$HF_HOME/hub/models--solo/snapshots/r1" in.txt | tq-cat -t tsv --name emb > direct.tsv
    run --separate-stderr tq-embed -v -m solo -o cached.tq in.txt
    assert_success
    [[ "$stderr" == *"tq-embed: model solo: $HF_HOME/hub/models--solo/snapshots/r1 (the Hugging Face cache)"* ]]
    tq-cat -t tsv --name emb cached.tq > cached.tsv
    cmp direct.tsv cached.tsv
}

@test "a TQ stream or binary data given as text: one line, exit 65, no output; invalid UTF-8 without NUL is still text" {
    printf 'one\ntwo\n' | tq-embed -m hash:8 > s.tq
    for cmd in 'tq-embed -m hash:8 <s.tq' 'tq-embed -m hash:8 s.tq' 'cat s.tq | tq-embed -m hash:8 -'; do
        case "$cmd" in *' s.tq') label=s.tq ;; *) label=stdin ;; esac
        run --separate-stderr bash -c "$cmd"
        [ "$status" -eq 65 ] && [ -z "$output" ] || fail "$cmd: $status, stdout ${#output} bytes"
        [ "$stderr" = "tq-embed: error: $label: this is a TQ stream, not text" ] || fail "$cmd: $stderr"
    done
    printf 'ab\r\ncd\0e\n' > nul.txt   # the NUL is byte 6 of the file (from 0)
    run --separate-stderr tq-embed -m hash:8 < nul.txt
    [ "$status" -eq 65 ] && [ -z "$output" ]
    [ "$stderr" = "tq-embed: error: stdin: binary data (a NUL byte at byte 6), not text" ]
    # the offset is that input's, after another input's lines
    run --separate-stderr tq-embed -m hash:8 -o out.tq <(printf 'x\ny\n') nul.txt
    [ "$status" -eq 65 ] && [ ! -e out.tq ]
    [ "$stderr" = "tq-embed: error: nul.txt: binary data (a NUL byte at byte 6), not text" ]
    # invalid UTF-8 without a NUL: repaired as before, exit 0
    printf 'caf\xe9\n\x89TQ\n' > latin1.txt
    run --separate-stderr tq-embed -q -m hash:8 -o l.tq latin1.txt
    assert_success
    [ -s l.tq ]
}
