#!/usr/bin/env bats
# tq-score --cross-encoder (lib/embed/cross.c, lib/score/pairs.c, lists.c)
# against an independent reference: tests/lib/cross_ref.py, the pair's ids
# from transformers' fast tokenizers (truncation=True, as CrossEncoder.predict
# asks), the encoder in float64 (encoder_ref.py), the classification head and
# CrossEncoder's activation from their definitions. Models are random ones
# made at test time by tests/lib/make_cross.py.
#
# Tolerance: |score - reference| <= 1e-5 (tq-score.1). tq runs in f32: a
# logit of a few units carries ~1e-6 of error through two layers, a sigmoid
# passes at most a quarter of it; a wrong token type, truncation, position or
# head moves scores by 1e-2 or more (the pairs of one group differ by ~0.05).
load helpers
bats_require_minimum_version 1.5.0

setup() {
    VENV_PY="$ROOT_DIR/.venv/bin/python"
    [ -x "$VENV_PY" ] || skip "no .venv (make deps-test makes it): the reference tokenizer is missing"
    "$VENV_PY" -c 'import transformers, torch, tokenizers' 2>/dev/null ||
        skip "transformers, tokenizers or torch missing from .venv (make deps-test; python3-torch)"
    T="$BATS_TEST_TMPDIR"
}

make_model() { "$VENV_PY" "$TESTS_DIR/lib/make_cross.py" "$@" 2>/dev/null; }
reference() { "$VENV_PY" "$TESTS_DIR/lib/cross_ref.py" "$1" 2>/dev/null; }

# N groups of M pairs QID QUERY DOCID TEXT from the models' words, texts of
# 1 to 40 words (past a 24-token window), and a few odd ones
pairs() { # N M SEED
    py -c "
import random
random.seed($3)
w = '''the a cat dog sat mat running quickly house city world music book read write
paris london tokyo model vector search embedding sentence hello night food guitar'''.split()
for g in range($1):
    q = ' '.join(random.choice(w) for _ in range(random.randint(1, 9)))
    for d in range($2):
        t = ' '.join(random.choice(w) for _ in range(random.randint(1, 40)))
        print('q%d\t%s\td%d\t%s' % (g, q, d, t if (g + d) % 7 else t + ' café 中国人 qzx!!'))"
}

# compares column 1 of REF with the scores of tq-score's rows (input order)
close_to() { # REF OURS
    run py -c "
import sys
r = [list(map(float, l.split())) for l in open('$1')]
o = [float(l) for l in open('$2')]
assert len(r) == len(o), (len(r), len(o))
bad = [(i, a[$LABEL], b) for i, (a, b) in enumerate(zip(r, o)) if not abs(a[$LABEL] - b) <= 1e-5]
assert not bad, bad[:5]
print('ok', max(abs(a[$LABEL] - b) for a, b in zip(r, o)))"
    assert_success
}

scores() { tq-cat -t tsv --name score | tail -n +2; }

# transformers' own AutoModelForSequenceClassification as well (float64,
# .venv-bench's transformers 4.36, which runs on this machine's torch 1.13):
# cross_ref.py --classes, the pair's ids and CrossEncoder's activation as above.
@test "transformers' own ...ForSequenceClassification (4.36, .venv-bench): BERT, RoBERTa, XLM-RoBERTa and MPNet scores within 1e-5" {
    PYB="$ROOT_DIR/.venv-bench/bin/python"
    [ -x "$PYB" ] && "$PYB" -c 'import torch, transformers; transformers.MPNetForSequenceClassification' 2>/dev/null ||
        skip "no .venv-bench with transformers 4.36 (make deps-test makes it)"
    pairs 4 6 2 > "$T/in.tsv"
    LABEL=0
    for arch in bert roberta xlm-roberta mpnet; do
        make_model "$T/$arch" --arch "$arch" --max-len 24 --seed 5
        "$PYB" "$TESTS_DIR/lib/cross_ref.py" "$T/$arch" --classes < "$T/in.tsv" > "$T/ref.txt" 2>/dev/null
        [ "$(wc -l < "$T/ref.txt")" -eq 24 ]
        tq-score --cross-encoder "$T/$arch" -o "$T/out.tq" "$T/in.tsv"
        scores < "$T/out.tq" > "$T/ours.txt"
        close_to "$T/ref.txt" "$T/ours.txt"
    done
}

@test "BERT, XLM-RoBERTa and MPNet cross-encoders (vocab.txt, then tokenizer.json): scores within 1e-5 of the reference, long pairs cut as the tokenizers library cuts them" {
    pairs 6 7 1 > "$T/in.tsv"
    LABEL=0
    for arch in bert xlm-roberta mpnet; do
        make_model "$T/$arch" --arch "$arch" --max-len 24 --seed 3
        reference "$T/$arch" < "$T/in.tsv" > "$T/ref.txt"
        run --separate-stderr tq-score -v --cross-encoder "$T/$arch" -o "$T/out.tq" "$T/in.tsv"
        assert_success
        [[ "$stderr" == *"42 pairs in 6 groups, 42 rows out, "*" pairs longer than the window cut to it"* ]] || fail "$stderr"
        [[ "$stderr" != *" 0 pairs longer"* ]] || fail "no pair was cut: $stderr"
        scores < "$T/out.tq" > "$T/ours.txt"
        close_to "$T/ref.txt" "$T/ours.txt"
        # the same tokenizer as tokenizer.json: its pair template and truncation
        "$VENV_PY" "$TESTS_DIR/lib/cross_ref.py" "$T/$arch" --save-tokenizer 2>/dev/null
        [ -s "$T/$arch/tokenizer.json" ]
        tq-score --cross-encoder "$T/$arch" "$T/in.tsv" | scores > "$T/ours.txt"
        close_to "$T/ref.txt" "$T/ours.txt"
    done
}

# bats test_tags=san:sample
@test "two labels: --label picks the output, no activation by default; a saved Identity activation" {
    pairs 3 5 2 > "$T/in.tsv"
    make_model "$T/m2" --arch bert --labels 2
    reference "$T/m2" < "$T/in.tsv" > "$T/ref.txt"
    for LABEL in 0 1; do
        tq-score --cross-encoder "$T/m2" --label "$LABEL" "$T/in.tsv" | scores > "$T/ours.txt"
        close_to "$T/ref.txt" "$T/ours.txt"
    done
    run -2 tq-score --cross-encoder "$T/m2" "$T/in.tsv"
    assert_output --partial "has 2 outputs: say which one ranks with --label"
    run -2 tq-score --cross-encoder "$T/m2" --label 2 "$T/in.tsv"
    assert_output --partial "--label 2: the model has 2 outputs"
    make_model "$T/id" --arch mpnet --activation identity
    reference "$T/id" < "$T/in.tsv" > "$T/ref.txt"
    LABEL=0
    tq-score --cross-encoder "$T/id" "$T/in.tsv" | scores > "$T/ours.txt"
    close_to "$T/ref.txt" "$T/ours.txt"
    awk '$1 < 0 || $1 > 1 { n++ } END { exit !(n > 0) }' "$T/ours.txt" # raw logits, not probabilities
}

@test "--top and --sort keep each group's best pairs in the reference's order" {
    pairs 5 8 3 > "$T/in.tsv"
    make_model "$T/m" --arch xlm-roberta --max-len 24
    reference "$T/m" < "$T/in.tsv" > "$T/ref.txt"
    tq-score --cross-encoder "$T/m" --top 3 --sort "$T/in.tsv" | tq-cat -t tsv --name group,key,rank |
        tail -n +2 > "$T/ours.tsv"
    run py -c "
rows = [l.rstrip('\n').split('\t') for l in open('$T/in.tsv')]
ref = [float(l.split()[0]) for l in open('$T/ref.txt')]
want = []
for g in sorted(set(r[0] for r in rows), key=lambda g: int(g[1:])):
    idx = sorted((i for i, r in enumerate(rows) if r[0] == g), key=lambda i: (-ref[i], i))[:3]
    want += ['%s\t%s\t%d' % (rows[i][0], rows[i][2], k + 1) for k, i in enumerate(idx)]
got = [l.rstrip('\n') for l in open('$T/ours.tsv')]
got = ['\t'.join(sorted(x.split('\t'), key=lambda c: (not c.startswith('q'), c))) for x in got]
want = ['\t'.join(sorted(x.split('\t'), key=lambda c: (not c.startswith('q'), c))) for x in want]
assert got == want, (got, want)
print('ok')"
    assert_success
}

@test "embed, search, rerank: tq-simmat's top-k lists joined to their texts score as the same pairs written out" {
    make_model "$T/ce" --arch bert --max-len 24
    py -c "
import random
random.seed(4)
w = 'the a cat dog sat mat running quickly house city world music book read write paris london'.split()
open('$T/docs.tsv', 'w').write(''.join('doc%d\t%s\n' % (i, ' '.join(random.choice(w) for _ in range(random.randint(3, 20)))) for i in range(40)))
open('$T/queries.tsv', 'w').write(''.join('q%d\t%s\n' % (i, ' '.join(random.choice(w) for _ in range(random.randint(1, 6)))) for i in range(6)))"
    tq-embed -m hash:64 --tsv "$T/docs.tsv" > "$T/db.tq"
    tq-embed -m hash:64 --tsv "$T/queries.tsv" > "$T/q.tq"
    tq-simmat --topk 5 --db "$T/db.tq" "$T/q.tq" > "$T/top.tq"
    tq-score --cross-encoder "$T/ce" --texts "$T/docs.tsv" --query-texts "$T/queries.tsv" "$T/top.tq" |
        tq-cat -t tsv --name key,group,score > "$T/lists.tsv"
    # the same lists as pairs, by the reference's hand
    tq-cat -t tsv --name key "$T/top.tq" | tail -n +2 > "$T/qk"
    tq-cat -t tsv --name db_key "$T/top.tq" | tail -n +2 > "$T/dk"
    py -c "
q = [l.strip() for l in open('$T/qk')]; d = [l.strip() for l in open('$T/dk')]
qt = dict(l.rstrip('\n').split('\t', 1) for l in open('$T/queries.tsv'))
dt = dict(l.rstrip('\n').split('\t', 1) for l in open('$T/docs.tsv'))
for i, k in enumerate(q):
    for j in range(5):
        print('%s\t%s\t%s\t%s' % (k, qt[k], d[i * 5 + j], dt[d[i * 5 + j]]))" > "$T/pairs.tsv"
    [ "$(wc -l < "$T/pairs.tsv")" -eq 30 ]
    reference "$T/ce" < "$T/pairs.tsv" > "$T/ref.txt"
    tail -n +2 "$T/lists.tsv" | cut -f3 > "$T/ours.txt"
    LABEL=0
    close_to "$T/ref.txt" "$T/ours.txt"
    tq-score --cross-encoder "$T/ce" "$T/pairs.tsv" | tq-cat -t tsv --name key,group,score > "$T/pairs.out"
    cmp "$T/lists.tsv" "$T/pairs.out"
    # a key without a text line is one line naming it, exit 65
    grep -v '^doc1	' "$T/docs.tsv" > "$T/less.tsv"
    grep -q 'doc1$' "$T/dk" || skip "doc1 is in no list"
    run -65 tq-score --cross-encoder "$T/ce" --texts "$T/less.tsv" --query-texts "$T/queries.tsv" "$T/top.tq"
    assert_output "tq-score: error: candidate doc1: no line with that ID in $T/less.tsv"
}

@test "bad pairs and options: a short line is 65 naming it, other features with --cross-encoder 2, an unknown activation 65, a missing model 66" {
    make_model "$T/m" --arch bert
    printf 'q1\tquery\td1\ttext\nq1\tquery only\n' > "$T/bad.tsv"
    run -65 tq-score --cross-encoder "$T/m" "$T/bad.tsv"
    assert_output "tq-score: error: $T/bad.tsv: line 2: wants QID<TAB>QUERY<TAB>DOCID<TAB>TEXT (fewer than 3 tabs)"
    run -2 tq-score --cross-encoder "$T/m" --consensus "$T/bad.tsv"
    assert_output --partial "scores text pairs by itself"
    run -2 tq-score --cross-encoder "$T/m" --texts "$T/bad.tsv" "$T/bad.tsv"
    assert_output --partial "go together"
    py -c "
import json; p = '$T/m/config.json'; c = json.load(open(p))
c['sentence_transformers'] = {'activation_fn': 'torch.nn.modules.activation.GELU'}; json.dump(c, open(p, 'w'))"
    run -65 tq-score --cross-encoder "$T/m" "$T/bad.tsv"
    assert_output "tq-score: error: $T/m/config.json: activation torch.nn.modules.activation.GELU is not supported (Sigmoid, Identity, Tanh and ReLU of torch.nn are)"
    run -66 tq-score --cross-encoder "$T/nothing" "$T/bad.tsv"
    [ "${#lines[@]}" -eq 1 ]
    run -66 tq-score --cross-encoder "$T/m" "$T/missing.tsv"
    [ "${#lines[@]}" -eq 1 ]
}
