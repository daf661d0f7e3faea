#!/bin/sh
# search.sh [DOCS [QUESTIONS]]: search from text to answers. Each line of DOCS
# (default: docs.txt beside this script) is embedded once into a database; each
# line of QUESTIONS (default: standard input) is embedded the same way and the
# three nearest documents are printed, as "question", then "score<TAB>line".
# The tools come from PATH (or TQ_BIN). Model: TQ_MODEL, default hash:384.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ -n "${TQ_BIN:-}" ] && PATH="$TQ_BIN:$PATH"
docs=${1:-$here/docs.txt}
questions=${2:--}
model=${TQ_MODEL:-hash:384}
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-search.XXXXXX")
trap 'rm -rf "$work"' EXIT

# the database: keys are the documents' line numbers (from 0)
tq-embed -m "$model" "$docs" > "$work/docs.tq"
cat "$questions" > "$work/questions.txt"
# top 3 per question, as TSV: key (question line), idx[3], score[3], db_key[3]
tq-embed -m "$model" "$work/questions.txt" |
    tq-simmat --db "$work/docs.tq" --topk 3 |
    tq-cat -t tsv > "$work/hits.tsv"
# line numbers to text (awk reads the two text files first, then the hits)
awk -F '\t' '
    FILENAME == ARGV[1] { doc[FNR - 1] = $0; next }
    FILENAME == ARGV[2] { q[FNR - 1] = $0; next }
    FNR == 1 { next }
    {
        print q[$1]
        for (r = 0; r < 3; r++)
            if ($(2 + r) >= 0)
                printf "  %.3f\t%s\n", $(5 + r), doc[$(8 + r)]
    }' "$docs" "$work/questions.txt" "$work/hits.tsv"
