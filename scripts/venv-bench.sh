#!/bin/sh
# venv-bench.sh: .venv-bench, the Python environment of the benchmark peers:
# Debian's python3 and python3-torch plus scripts/requirements-bench.txt from
# PyPI (whose numpy wheel bundles an OpenBLAS that knows this processor).
# A failure (no network) is a warning: the benchmarks that need a peer say so.
set -u
cd "$(dirname "$0")/.."
stamp=.venv-bench/.tq-stamp
want=$(cat scripts/requirements-bench.txt scripts/venv-bench.sh | cksum)
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0
echo "venv-bench: setting up .venv-bench (PyPI benchmark peers)" >&2
if ! { [ -x .venv-bench/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv-bench; } ||
   ! .venv-bench/bin/pip install -q --disable-pip-version-check -r scripts/requirements-bench.txt ||
   ! .venv-bench/bin/pip install -q --disable-pip-version-check --no-deps \
       sentence-transformers==2.7.0 transformers==4.36.2; then
    echo "venv-bench: warning: could not install the PyPI peers; benchmarks that need them are skipped" >&2
    exit 0
fi
echo "$want" > "$stamp"
