#!/bin/sh
# bench-two-builds.sh OLD NEW [OUTDIR]: benchmarks two builds of tq on this
# machine, one after the other, and compares them row by row. OLD and NEW are
# either folders holding a tq-bench (bin/ of a build) or git revisions of the
# repository this script is in, which are then built in scratch worktrees.
# Writes OUTDIR/old.json and OUTDIR/new.json (default: the current folder) and
# prints the comparison: a row is called slower or faster only beyond the
# measured spread of both runs.
#   TQ_BENCH_ARGS         what to run (default: every op on the CPU)
#   TQ_BENCH_FAIL_SLOWER  PCT: exit 1 when a row is slower by more than PCT %
# Example: samples/bench-two-builds.sh main HEAD
set -eu
old=${1:?usage: bench-two-builds.sh OLD NEW [OUTDIR]}
new=${2:?usage: bench-two-builds.sh OLD NEW [OUTDIR]}
out=${3:-.}
args=${TQ_BENCH_ARGS:---device cpu}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-two-builds.XXXXXX")
trap 'for w in "$work"/src-*; do [ -d "$w" ] && git -C "$root" worktree remove --force "$w"; done; rm -rf "$work"' EXIT

# bindir_of NAME REV_OR_DIR: a folder with a tq-bench in it
bindir_of() {
    if [ -x "$2/tq-bench" ]; then
        (cd "$2" && pwd)
        return
    fi
    git -C "$root" rev-parse --verify -q "$2^{commit}" >/dev/null ||
        { echo "bench-two-builds: $2: neither a folder with tq-bench nor a git revision" >&2; exit 2; }
    git -C "$root" worktree add -q --detach "$work/src-$1" "$2"
    make -C "$work/src-$1" -j"$(nproc)" all >&2
    echo "$work/src-$1/bin"
}
old_bin=$(bindir_of old "$old")
new_bin=$(bindir_of new "$new")

# shellcheck disable=SC2086 # TQ_BENCH_ARGS is a list of options
"$old_bin/tq-bench" $args --format json -o "$out/old.json"
# shellcheck disable=SC2086
"$new_bin/tq-bench" $args --format json -o "$out/new.json"
if [ -n "${TQ_BENCH_FAIL_SLOWER:-}" ]; then
    "$new_bin/tq-bench" --compare "$out/old.json" "$out/new.json" --fail-slower "$TQ_BENCH_FAIL_SLOWER"
else
    "$new_bin/tq-bench" --compare "$out/old.json" "$out/new.json"
fi
