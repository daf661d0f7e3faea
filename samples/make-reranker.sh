#!/bin/sh
# make-reranker.sh: writes samples/reranker, the tiny random cross-encoder of
# tq-score(1)'s reranking example (a BertForSequenceClassification folder of one
# layer, 16 wide, its vocabulary the words of docs.txt), with
# tests/lib/make_cross.py. Its scores mean nothing: it shows the pipeline.
set -e
cd "$(dirname "$0")"
rm -rf reranker
../.venv/bin/python ../tests/lib/make_cross.py reranker --arch bert --hidden 16 --layers 1 \
    --heads 2 --inter 32 --max-pos 66 --words docs.txt --seed 2
