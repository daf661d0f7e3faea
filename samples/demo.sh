#!/bin/sh
# demo.sh BINDIR: the sample pipeline of `make demo`: numeric text in, a
# compressed TQ stream, a look inside it, and a NumPy file out and back again.
set -eu
BIN=${1:?usage: demo.sh BINDIR}
PATH="$BIN:$PATH"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== samples/vectors.csv, imported, compressed and stored as a stream:"
echo "   tq-cat --from csv --as emb vectors.csv | tq-cat -z -o demo.tq"
tq-cat --from csv --as emb "$here/vectors.csv" | tq-cat -z -o "$work/demo.tq"
echo
echo "== its frames (tq-cat --info demo.tq):"
tq-cat --info "$work/demo.tq"
echo
echo "== its rows, keys first (tq-cat -t tsv demo.tq):"
tq-cat -t tsv "$work/demo.tq"
echo
echo "== the numbers out to NumPy and back (tq-cat --to npy --name emb -o emb.npy demo.tq):"
tq-cat --to npy --name emb -o "$work/emb.npy" "$work/demo.tq"
tq-cat --from npy --as emb "$work/emb.npy" | tq-cat -t jsonl
echo
echo "== devices this build can use (tq-cat --list-devices):"
tq-cat --list-devices
