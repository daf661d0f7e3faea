#!/bin/sh
# venv-bench.sh: .venv-bench, the Python environment of the benchmark peers:
# Debian's python3 and python3-torch plus scripts/requirements-bench.txt from
# PyPI (whose numpy wheel bundles an OpenBLAS that knows this processor).
# Then .venv-ort, the ONNX Runtime peer's (scripts/requirements-ort.txt).
# The tests use .venv-bench too: its transformers 4.36 runs on Debian's torch
# 1.13, where .venv's (for the tokenizers library's newest) refuses to.
# A failure (no network) is a warning: the benchmarks that need a peer say so.
set -u
cd "$(dirname "$0")/.."
stamp=.venv-bench/.tq-stamp
want=$(cat scripts/requirements-bench.txt scripts/venv-bench.sh | cksum)
bench_venv() {
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
    echo "venv-bench: setting up .venv-bench (PyPI benchmark peers)" >&2
    if ! { [ -x .venv-bench/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv-bench; } ||
       ! .venv-bench/bin/pip install -q --disable-pip-version-check -r scripts/requirements-bench.txt ||
       ! .venv-bench/bin/pip install -q --disable-pip-version-check --no-deps \
           sentence-transformers==2.7.0 transformers==4.36.2; then
        # on standard output too: `make bench` says it where its figures are
        echo "venv-bench: warning: could not install the PyPI peers; the benchmarks that need them say 'not measured'" | tee /dev/stderr
        return 0
    fi
    # installed is not enough: the peer must import (Pillow was missing once)
    why=$(.venv-bench/bin/python -c 'import torch, sentence_transformers' 2>&1 >/dev/null | grep . | tail -n 1)
    if [ -n "$why" ]; then
        echo "venv-bench: warning: sentence_transformers does not import in .venv-bench: $why" | tee /dev/stderr
        return 0
    fi
    echo "$want" > "$stamp"
}
bench_venv
# `venv-bench.sh st`: .venv-bench alone, for the tests that compare with
# transformers' own model classes (make deps-test)
[ "${1:-}" = st ] && exit 0

# .venv-ort: ONNX Runtime (with onnx, which its quantizer imports) and the
# tokenizers library, without Debian's packages
# (onnxruntime wants NumPy 2, Debian's PyTorch NumPy 1)
stamp=.venv-ort/.tq-stamp
want=$(cat scripts/requirements-ort.txt | cksum)
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0
echo "venv-bench: setting up .venv-ort (ONNX Runtime peer)" >&2
if ! { [ -x .venv-ort/bin/python ] || /usr/bin/python3 -m venv .venv-ort; } ||
   ! .venv-ort/bin/pip install -q --disable-pip-version-check -r scripts/requirements-ort.txt; then
    echo "venv-bench: warning: could not install onnxruntime; the ONNX Runtime peer says 'not measured'" | tee /dev/stderr
    exit 0
fi
echo "$want" > "$stamp"
