#!/usr/bin/env bash
# bench-encoders.sh BINDIR: the encoder families beyond BERT (issue 39), against
# transformers' own model classes on the same machine, all cores, one run:
#   MPNet   tq-embed (f32, and bf16 where the CPU has AVX512-BF16) on a model
#           of all-mpnet-base-v2's shape (12 layers of 768, 12 heads, relative
#           position bias; random weights: no real MPNet is at hand here), 400
#           sentences of 8 to 30 words, whole process; the peer MPNetModel's
#           f32 forward with mean pooling and Normalize, as sentence-transformers'
#           encode() runs it (scripts/bench-encoders.py: tokenizing included, the
#           model loaded before the clock), with the min cosine to tq's vectors;
#   rerank  tq-score --cross-encoder on an XLM-RoBERTa cross-encoder of the
#           same shape (ms-marco rerankers' kind), 40 queries x 10 passages,
#           against XLMRobertaForSequenceClassification + sigmoid, as
#           CrossEncoder.predict() runs it, with the largest score difference.
# The peer is .venv-bench's transformers 4.36 on Debian's torch 1.13 (PyPI's
# own torch wheels are not reachable here); and ONNX Runtime (.venv-ort, CPU
# provider, all graph optimizations) on the models exported by
# export-onnx.py, timed in-process after loading (bench-ort.py, as for
# MiniLM in bench-embed.sh). Reported, never enforced.
set -euo pipefail
BIN=${1:?usage: bench-encoders.sh BINDIR}
export PATH="$BIN:$PATH"
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/bench-peer.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-bench-enc.XXXXXX")
trap 'rm -rf "$work"' EXIT
PYV="$root/.venv/bin/python"    # makes the models (tests/lib)
PYB="$root/.venv-bench/bin/python"
if ! [ -x "$PYB" ] || ! "$PYB" -c 'import torch, transformers; transformers.MPNetModel' 2>/dev/null ||
   ! [ -x "$PYV" ]; then
    not_measured "encoders (MPNet, XLM-RoBERTa reranker)" ".venv-bench or .venv is missing (make deps-test)"
    exit 0
fi
export PYTHONPATH="$root/tests/lib"
PYO="$root/.venv-ort/bin/python"
threads=$(nproc)
why_ort=$(py_why "$PYO" onnxruntime tokenizers numpy)
# t_ort: ONNX Runtime's seconds for FOLDER (embed or cross) on INPUT, its
# outputs to OUT.npy; empty (and why_ort set) when it cannot run
ort_time() { # KIND FOLDER INPUT OUT.npy [--pairs WINDOW]
    t_ort=""
    [ -z "$why_ort" ] || return 0
    local k=$1 f=$2 in=$3 o=$4
    shift 4
    if ! "$PYB" "$root/scripts/export-onnx.py" "$f" "$f.onnx" $([ "$k" = cross ] && echo cross) \
        > "$work/export.log" 2>&1 ||
       ! "$PYB" "$root/scripts/bench-encoders.py" tokjson "$f" - "$f.tok.json" 2>> "$work/export.log"; then
        why_ort="the export to ONNX failed: $(grep . "$work/export.log" | tail -n 1)"
        return 0
    fi
    t_ort=$("$PYO" "$root/scripts/bench-ort.py" "$f.onnx" "$f.tok.json" "$in" "$threads" "$o" "$@" \
        2> "$work/ort.err") || { t_ort=""; why_ort="bench-ort.py failed: $(grep . "$work/ort.err" | tail -n 1)"; }
}

# best of 3 wall-clock seconds of a shell command
best3() {
    local b="" t0 t1 dt
    for _ in 1 2 3; do
        t0=$EPOCHREALTIME; bash -c "$1"; t1=$EPOCHREALTIME
        dt=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$b" ] || [ "$(echo "$dt < $b" | bc -l)" = 1 ]; then b=$dt; fi
    done
    echo "$b"
}

base="--hidden 768 --layers 12 --heads 12 --inter 3072 --max-pos 514"
"$PYV" "$root/tests/lib/make_encoder.py" "$work/mpnet" --arch mpnet --pool mean --normalize \
    $base --max-seq 128 2>/dev/null
"$PYV" "$root/tests/lib/make_cross.py" "$work/rerank" --arch xlm-roberta --max-len 128 $base 2>/dev/null
"$PYV" - "$work" <<'PY'
import random, sys
random.seed(1)
w = '''the a cat dog sat mat running quickly house city world music book read write
paris london tokyo model vector search embedding sentence hello night food guitar'''.split()
text = lambda a, b: " ".join(random.choice(w) for _ in range(random.randint(a, b)))
open(sys.argv[1] + "/s.txt", "w").write("".join(text(8, 30) + "\n" for _ in range(400)))
open(sys.argv[1] + "/p.tsv", "w").write("".join(
    "q%d\t%s\td%d\t%s\n" % (g, q, d, text(10, 60)) for g in range(40)
    for q in [text(2, 8)] for d in range(10)))
PY

# ---- MPNet sentence embeddings ----
t_tq=$(best3 "tq-embed -m '$work/mpnet' '$work/s.txt' > '$work/v.tq'")
tq-cat -t tsv --name emb "$work/v.tq" | tail -n +2 | tr '\t' ' ' > "$work/v.txt"
t_pe=$("$PYB" "$root/scripts/bench-encoders.py" embed "$work/mpnet" "$work/s.txt" "$work/pv.npy")
cos=$("$PYV" -c "
import numpy as np, sys
a = np.loadtxt('$work/v.txt'); b = np.load('$work/pv.npy')
c = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
print('%.7f' % c.min())")
printf 'MPNet (12 x 768), 400 sentences: tq-embed %.1f/s whole process; transformers 4.36 MPNetModel (f32, batches of 32) %.1f/s; ratio %.2f; min cosine %s\n' \
    "$(echo "400 / $t_tq" | bc -l)" "$(echo "400 / $t_pe" | bc -l)" "$(echo "$t_pe / $t_tq" | bc -l)" "$cos"
ort_time embed "$work/mpnet" "$work/s.txt" "$work/ov.npy"
if [ -n "$t_ort" ]; then
    cos=$("$PYV" -c "
import numpy as np
a = np.loadtxt('$work/v.txt'); b = np.load('$work/ov.npy')
c = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
print('%.7f' % c.min())")
    printf 'MPNet (12 x 768), 400 sentences: ONNX Runtime (f32) %.1f/s (encoding only); tq-embed ratio %.2f; min cosine %s\n' \
        "$(echo "400 / $t_ort" | bc -l)" "$(echo "$t_ort / $t_tq" | bc -l)" "$cos"
else
    not_measured "ONNX Runtime (MPNet)" "$why_ort"
fi
if grep -qw avx512_bf16 /proc/cpuinfo; then
    t_bf=$(best3 "tq-embed --precision bf16 -m '$work/mpnet' '$work/s.txt' > /dev/null")
    printf 'MPNet (12 x 768), 400 sentences, --precision bf16: tq-embed %.1f/s (%.2fx its f32), ratio %.2f to the f32 peer\n' \
        "$(echo "400 / $t_bf" | bc -l)" "$(echo "$t_tq / $t_bf" | bc -l)" "$(echo "$t_pe / $t_bf" | bc -l)"
fi

# ---- XLM-RoBERTa cross-encoder reranking ----
t_tq=$(best3 "tq-score --cross-encoder '$work/rerank' -o '$work/s.tq' '$work/p.tsv'")
tq-cat -t tsv --name score "$work/s.tq" | tail -n +2 > "$work/sc.txt"
t_pe=$("$PYB" "$root/scripts/bench-encoders.py" cross "$work/rerank" "$work/p.tsv" "$work/ps.npy")
dif=$("$PYV" -c "
import numpy as np
a = np.loadtxt('$work/sc.txt'); b = np.load('$work/ps.npy')
print('%.2g' % np.abs(a - b).max())")
printf 'XLM-RoBERTa cross-encoder (12 x 768), 400 pairs: tq-score %.1f pairs/s whole process; transformers 4.36 XLMRobertaForSequenceClassification (f32, batches of 32) %.1f/s; ratio %.2f; largest score difference %s\n' \
    "$(echo "400 / $t_tq" | bc -l)" "$(echo "400 / $t_pe" | bc -l)" "$(echo "$t_pe / $t_tq" | bc -l)" "$dif"
ort_time cross "$work/rerank" "$work/p.tsv" "$work/os.npy" --pairs 128
if [ -n "$t_ort" ]; then
    dif=$("$PYV" -c "
import numpy as np
a = np.loadtxt('$work/sc.txt'); b = np.load('$work/os.npy')
print('%.2g' % np.abs(a - b).max())")
    printf 'XLM-RoBERTa cross-encoder (12 x 768), 400 pairs: ONNX Runtime (f32) %.1f pairs/s (scoring only); tq-score ratio %.2f; largest score difference %s\n' \
        "$(echo "400 / $t_ort" | bc -l)" "$(echo "$t_ort / $t_tq" | bc -l)" "$dif"
else
    not_measured "ONNX Runtime (XLM-RoBERTa cross-encoder)" "$why_ort"
fi
