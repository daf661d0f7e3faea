#!/bin/sh
# dedup.sh [THRESHOLD [FILE]]: prints the lines of FILE (default: standard
# input) less the near-duplicates: a line goes when its cosine similarity with
# an earlier kept line is THRESHOLD (default 0.8) or more. The lines that stay
# are the input's own text, in order. Tools from PATH (or TQ_BIN); model
# TQ_MODEL, default hash:384 (word and letter n-gram overlap).
set -eu
[ -n "${TQ_BIN:-}" ] && PATH="$TQ_BIN:$PATH"
t=${1:-0.8}
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-dedup.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat "${2:--}" > "$work/in.txt"
# keys are line numbers (from 0); blank lines are not embedded, and not printed
tq-embed -m "${TQ_MODEL:-hash:384}" "$work/in.txt" |
    tq-simmat --dedup "$t" |
    tq-cat -t tsv --name key > "$work/kept.tsv"
awk 'FILENAME == ARGV[1] { if (FNR > 1) keep[$1] = 1; next }
     (FNR - 1) in keep' "$work/kept.tsv" "$work/in.txt"
