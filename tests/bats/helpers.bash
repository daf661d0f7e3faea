# helpers.bash: what every Bats suite of tq loads first.
# TQ_BIN (set by the Makefile) holds the tools under test.
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

TESTS_DIR="$(cd "$(dirname "${BATS_TEST_FILENAME}")/.." && pwd)"
ROOT_DIR="$(cd "$TESTS_DIR/.." && pwd)"
: "${TQ_BIN:=$ROOT_DIR/bin}"
export PATH="$TQ_BIN:$PATH"
# Debian's python3 with python3-numpy: the independent reference of the tests.
PY=/usr/bin/python3
export PYTHONPATH="$TESTS_DIR/lib${PYTHONPATH:+:$PYTHONPATH}"
# Tests must not depend on the caller's environment.
unset TQ_DEVICE TQ_THREADS TQ_LOG

# py SCRIPT ARGS...: runs inline Python with the test library on the path.
py() { "$PY" "$@"; }

# needs_numpy: skip with a clear message when the reference is absent.
needs_numpy() {
    "$PY" -c 'import numpy' 2>/dev/null ||
        skip "python3-numpy is not installed (make deps-test installs it)"
}

# needs_peak_rss: skip a peak-memory test where it cannot be measured: without
# GNU time, or under AddressSanitizer (its shadow memory and quarantine are no
# measure of ours).
needs_peak_rss() {
    [ -x /usr/bin/time ] || skip "/usr/bin/time is not installed"
    case "$TQ_BIN" in */san/*) skip "peak memory is not measured under sanitizers" ;; esac
}
