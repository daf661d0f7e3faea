#!/bin/sh
# train-scorer.sh: trains a hypothesis scorer from embedded text and uses it.
# TRAIN.tsv and TEST.tsv hold n-best lists, one hypothesis a line as
# GROUP<TAB>LABEL<TAB>TEXT (the right hypothesis of each group labelled 1):
# the texts are embedded (tq-embed), a linear scorer learns with the listwise
# loss to rank the right one first (tq-train), and tq-score picks the best
# hypothesis of each test group. Prints GROUP<TAB>TEXT of each pick.
# Usage: train-scorer.sh TRAIN.tsv TEST.tsv [MODEL.tq]
set -eu
train=$1 test=$2 model=${3:-nbest-scorer.tq}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# TSV -> one stream with the frames group, y, key and emb, in one batch (so
# that tq-score keeps the groups aligned with the rows)
frames() {
    awk -F '\t' '{ printf "{\"group\": %s, \"y\": %s}\n", $1, $2 }' "$1" |
        tq-cat --from jsonl --dtype i64 > "$tmp/gy.tq"
    cut -f3 "$1" | tq-embed -m hash:256 --batch 1000000 > "$tmp/e.tq"
    tq-cat "$tmp/gy.tq" "$tmp/e.tq" > "$2"
}

frames "$train" "$tmp/train.tq"
tq-train --model linear --loss listwise --epochs 20 --batch 8 --lr 0.05 -o "$model" "$tmp/train.tq"
frames "$test" "$tmp/test.tq"
# the keys are the lines of TEST.tsv from 0: print each pick's text
tq-score -m "$model" --top 1 "$tmp/test.tq" | tq-cat -t tsv --no-header --name key,group |
    awk -F '\t' 'NR == FNR { text[NR - 1] = $3; next } { print $2 "\t" text[$1] }' "$test" -
