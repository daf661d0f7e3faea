#!/usr/bin/env bats
# The encoder families beyond BERT (MPNet, RoBERTa, XLM-RoBERTa), the Pooling
# module's six modes, Dense modules, prompts and long texts, against an
# independent reference: tests/lib/encoder_ref.py, the forward passes written
# out in float64 PyTorch from transformers' modeling code (MPNet's relative
# position bias with transformers' own torch ops), sentence-transformers'
# Pooling, Dense and Normalize from their definitions, and transformers'
# BertTokenizer for the ids. Models are random ones made at test time by
# tests/lib/make_encoder.py, at weight scales where every part shows (without
# MPNet's position bias, the vectors' cosine to the reference falls to 0.96).
#
# Tolerance: cosine >= 0.99999 per text, as tq-embed.1 states and bert.bats
# argues: tq runs in f32, and a wrong position, bias, mode or module moves a
# vector far below it.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    VENV_PY="$ROOT_DIR/.venv/bin/python"
    [ -x "$VENV_PY" ] || skip "no .venv (make deps-test makes it): the reference tokenizer is missing"
    "$VENV_PY" -c 'import transformers, torch, numpy' 2>/dev/null ||
        skip "transformers, torch or numpy missing from .venv (make deps-test; python3-torch)"
    BE="$TQ_TEST_TOOLS/bert-embed"
    [ -x "$BE" ] || fail "bert-embed not built (make check-bats builds it)"
    T="$BATS_TEST_TMPDIR"
}

make_model() { # DIR ARGS...
    "$VENV_PY" "$TESTS_DIR/lib/make_encoder.py" "$@" 2>/dev/null
}

reference() { # FOLDER [ARGS] < lines > vectors
    "$VENV_PY" "$TESTS_DIR/lib/encoder_ref.py" "$@" 2>/dev/null
}

agree() { # REF OURS
    run py "$TESTS_DIR/lib/cosine.py" "$1" "$2" 0.99999
    assert_success
}

# Lines from the models' vocabulary (make_bert.py's words), of 1 to 40 words,
# and a few that are not: unknown words, accents, CJK, an empty line.
lines() { # N SEED
    py -c "
import random
random.seed($2)
w = '''the a cat dog sat mat running quickly house city world music book read write
paris london tokyo model vector search embedding sentence hello night food guitar'''.split()
for i in range($1):
    print(' '.join(random.choice(w) for _ in range(random.randint(1, 40))))
print('qzx unknownwords!! café naïve 中国人')
print('Hello, World.')
print('')"
}

tool_rows() { # ARGS... (tq-embed's, with the input last) > vectors
    tq-embed "$@" | tq-cat -t tsv --name emb | tail -n +2 | tr '\t' ' '
}

@test "MPNet (relative position bias, positions past the padding id): agrees with the reference at batch sizes 1, 5 and 40" {
    make_model "$T/m" --arch mpnet --pool mean --normalize --max-seq 32
    lines 40 1 > "$T/in.txt"
    reference "$T/m" < "$T/in.txt" > "$T/ref.txt"
    for b in 1 5 40; do
        "$BE" "$T/m" "$b" < "$T/in.txt" > "$T/ours.txt"
        agree "$T/ref.txt" "$T/ours.txt"
    done
}

# transformers' own model classes as well: .venv-bench's transformers 4.36
# (make deps-test makes it) runs on this machine's torch 1.13, where .venv's
# does not; encoder_ref.py --classes takes AutoModel (BertModel, RobertaModel,
# XLMRobertaModel, MPNetModel) in float64 for the hand-written forward pass,
# the rest (ids, pooling, Dense, Normalize) as above. Same bound.
@test "transformers' own BertModel, RobertaModel, XLMRobertaModel and MPNetModel (4.36, .venv-bench): tq-embed within cosine 0.99999" {
    PYB="$ROOT_DIR/.venv-bench/bin/python"
    [ -x "$PYB" ] && "$PYB" -c 'import torch, transformers; transformers.MPNetModel' 2>/dev/null ||
        skip "no .venv-bench with transformers 4.36 (make deps-test makes it)"
    lines 30 6 > "$T/in.txt"
    for arch in bert roberta xlm-roberta mpnet; do
        make_model "$T/$arch" --arch "$arch" --pool mean --normalize --max-seq 32 --seed 7
        "$PYB" "$TESTS_DIR/lib/encoder_ref.py" --classes "$T/$arch" < "$T/in.txt" > "$T/ref.txt" 2>/dev/null
        [ "$(wc -l < "$T/ref.txt")" -eq 33 ] # and lines' three odd ones
        tool_rows -m "$T/$arch" --on-empty keep --batch 8 "$T/in.txt" > "$T/ours.txt"
        agree "$T/ref.txt" "$T/ours.txt"
    done
}

@test "MPNet with the mpnet. prefix (a task model's names), CLS pooling, through tq-embed" {
    make_model "$T/m" --arch mpnet --pool cls --prefix --max-seq 20 --seed 3
    lines 20 2 > "$T/in.txt"
    reference "$T/m" < "$T/in.txt" > "$T/ref.txt"
    tool_rows -m "$T/m" --on-empty keep --batch 7 "$T/in.txt" > "$T/ours.txt"
    agree "$T/ref.txt" "$T/ours.txt"
}

@test "RoBERTa and XLM-RoBERTa: all six pooling modes concatenated, two Dense modules, Normalize" {
    for arch in roberta xlm-roberta; do
        make_model "$T/$arch" --arch "$arch" --seed 5 --max-seq 24 \
            --pool cls,mean,max,mean_sqrt_len_tokens,weightedmean,lasttoken \
            --dense 20:tanh,12:identity --normalize
        lines 30 3 > "$T/in.txt"
        reference "$T/$arch" < "$T/in.txt" > "$T/ref.txt"
        "$BE" "$T/$arch" 8 < "$T/in.txt" > "$T/ours.txt"
        [ "$(head -1 "$T/ours.txt" | wc -w)" -eq 12 ] # the last Dense's width
        agree "$T/ref.txt" "$T/ours.txt"
    done
}

@test "the older boolean pooling keys with several modes on, a relu and a sigmoid Dense, a BERT model" {
    make_model "$T/m" --arch bert --legacy-pool --pool max,mean,lasttoken --dense 16:relu,6:sigmoid
    lines 25 4 > "$T/in.txt"
    reference "$T/m" < "$T/in.txt" > "$T/ref.txt"
    "$BE" "$T/m" 4 < "$T/in.txt" > "$T/ours.txt"
    agree "$T/ref.txt" "$T/ours.txt"
}

@test "--prompt, --prompt-name and a Pooling module that leaves the prompt out (include_prompt false)" {
    make_model "$T/m" --arch mpnet --pool mean,cls,weightedmean --exclude-prompt --prompts --max-seq 20
    lines 20 5 > "$T/in.txt"
    reference "$T/m" --prompt-name query < "$T/in.txt" > "$T/ref.txt"
    tool_rows -m "$T/m" --prompt-name query --on-empty keep "$T/in.txt" > "$T/ours.txt"
    agree "$T/ref.txt" "$T/ours.txt"
    reference "$T/m" --prompt "passage: " < "$T/in.txt" > "$T/ref.txt"
    tool_rows -m "$T/m" --prompt "passage: " --on-empty keep "$T/in.txt" > "$T/ours.txt"
    agree "$T/ref.txt" "$T/ours.txt"
    # the prompt counts: without it the vectors are another model's
    tool_rows -m "$T/m" --on-empty keep "$T/in.txt" > "$T/plain.txt"
    run py "$TESTS_DIR/lib/cosine.py" "$T/ref.txt" "$T/plain.txt" 0.99999
    assert_failure
    # a default_prompt_name applies without any option
    py -c "
import json; p = '$T/m/config_sentence_transformers.json'
c = json.load(open(p)); c['default_prompt_name'] = 'passage'; json.dump(c, open(p, 'w'))"
    tool_rows -m "$T/m" --on-empty keep "$T/in.txt" > "$T/ours.txt"
    agree "$T/ref.txt" "$T/ours.txt"
}

@test "prompts: an unknown name, --prompt on a model without a folder, both options: exit 2, one line" {
    make_model "$T/m" --arch mpnet --prompts
    echo hello > "$T/in.txt"
    run -2 tq-embed -m "$T/m" --prompt-name summary "$T/in.txt"
    assert_output "tq-embed: error: $T/m: the model has no prompt \"summary\" (it has: query, passage)"
    run -2 tq-embed -m hash:64 --prompt "query: " "$T/in.txt"
    assert_output --partial "take a model folder"
    [ "${#lines[@]}" -eq 1 ]
    run -2 tq-embed -m "$T/m" --prompt "q: " --prompt-name query "$T/in.txt"
    assert_output --partial "exclude each other"
}

@test "--long: texts past the window cut and counted under -v, or embedded as averaged windows (--long chunk)" {
    make_model "$T/m" --arch mpnet --pool mean --normalize --max-seq 16 --dense 8:tanh
    lines 30 6 > "$T/in.txt"
    # the texts over the window by the reference tokenizer: more than 14 pieces
    long=$("$VENV_PY" -c "
import transformers, sys
transformers.logging.set_verbosity_error()
t = transformers.BertTokenizer('$T/m/vocab.txt')
print(sum(len(t(l)['input_ids']) > 16 for l in open('$T/in.txt', encoding='utf-8').read().split('\n')[:-1] if l))" 2>/dev/null)
    [ "$long" -gt 5 ]
    reference "$T/m" < "$T/in.txt" > "$T/ref.txt"
    run --separate-stderr tq-embed -v -m "$T/m" --on-empty keep -o "$T/out.tq" "$T/in.txt"
    assert_success
    [[ "$stderr" == *"$long texts longer than the model's window of 16 tokens, cut to it"* ]] || fail "$stderr"
    tq-cat -t tsv --name emb "$T/out.tq" | tail -n +2 | tr '\t' ' ' > "$T/ours.txt"
    agree "$T/ref.txt" "$T/ours.txt"
    reference "$T/m" --chunk < "$T/in.txt" > "$T/ref.txt"
    run --separate-stderr tq-embed -v -m "$T/m" --long chunk --on-empty keep -o "$T/out.tq" "$T/in.txt"
    assert_success
    [[ "$stderr" == *"$long texts longer than the model's window of 16 tokens, embedded in "*" windows (--long chunk)"* ]] || fail "$stderr"
    tq-cat -t tsv --name emb "$T/out.tq" | tail -n +2 | tr '\t' ' ' > "$T/ours.txt"
    agree "$T/ref.txt" "$T/ours.txt"
    run -2 tq-embed -m "$T/m" --long split "$T/in.txt"
    assert_output --partial "--long does not know 'split'"
}

@test "unsupported encoder settings are exit 65 naming the file: a Dense activation, use_residual, in_features, model_type's padding" {
    make_model "$T/m" --arch roberta --dense 8:tanh
    check() { # FILE PYTHON-EDIT EXPECTED
        rm -rf "$T/c"; cp -r "$T/m" "$T/c"
        py -c "
import json; p = '$T/c/$1'; c = json.load(open(p)); $2; json.dump(c, open(p, 'w'))"
        run "$BE" "$T/c" < /dev/null
        [ "$status" -eq 65 ] || fail "$1: status $status: $output"
        [[ "$output" == "bert-embed: $T/c/$1: "*"$3"* ]] || fail "$1: $output"
        [ "${#lines[@]}" -eq 1 ]
    }
    check 2_Dense/config.json "c['activation_function'] = 'torch.nn.modules.activation.GELU'" "activation_function torch.nn.modules.activation.GELU is not supported"
    check 2_Dense/config.json "c['use_residual'] = True" "use_residual is not supported"
    check 2_Dense/config.json "c['in_features'] = 31" "in_features 31, but the module before gives 32"
    check config.json "c['max_position_embeddings'] = 2" "leaves no position past the padding id"
    check config.json "c['model_type'] = 7" "must be a string"
}

# MPNet's relative position bias on Vulkan: the attention shaders' _bias
# variants, not the host (-v would name it). (CUDA and HIP: gpu.bats, which
# make gpu-check also runs on a real GPU.)
@test "MPNet on Vulkan: the score bias in the shader, rows agree with the reference" {
    tq-cat --list-devices 2>/dev/null | grep -q '^vulkan:0' || skip "no Vulkan device here"
    make_model "$T/m" --arch mpnet --pool mean --normalize --max-seq 24 --seed 9
    lines 6 7 | grep -v '^$' > "$T/in.txt" # (tq-embed skips empty lines)
    reference "$T/m" < "$T/in.txt" > "$T/ref.txt"
    tool_rows -v -m "$T/m" --device vulkan --batch 3 "$T/in.txt" 2> "$T/err" > "$T/vk.txt"
    ! grep -q 'ran on the host.*attention' "$T/err" || fail "$(cat "$T/err")"
    agree "$T/ref.txt" "$T/vk.txt"
}

# --precision bf16 and int8 on the other families (AVX512-BF16, AVX512-VNNI):
# the same products as BERT's (bert.bats tests their recipe on the real
# all-MiniLM-L6-v2), here through MPNet's biased attention and RoBERTa's
# positions, on texts past 64 tokens too (where the attention's products go
# bf16, the bias added to their f32 scores).
# Bound: tq-embed.1's cosine 0.999 with the f32 rows (measured on these
# random models on a Zen 4: 0.99998 and more with bf16, 0.99992 and more with
# int8, whose word embeddings are int8 too); a product left f32 shows as f32's bytes.
# Without the instructions: f32's bytes and one -v note.
@test "MPNet and RoBERTa --precision bf16 and int8: within cosine 0.999 of f32, or f32's bytes and a note" {
    { lines 12 5; py -c "print(' '.join(['music book read write paris'] * 30))"; } > "$T/in.txt"
    for arch in mpnet roberta; do
        make_model "$T/$arch" --arch "$arch" --pool mean --max-seq 200 --seed 4
        tool_rows -m "$T/$arch" --batch 5 "$T/in.txt" > "$T/$arch.f32"
        for p in bf16 int8; do
            flag=$([ "$p" = bf16 ] && echo avx512_bf16 || echo avx512_vnni)
            tq-embed -v -m "$T/$arch" --batch 5 --precision "$p" "$T/in.txt" 2> "$T/err" |
                tq-cat -t tsv --name emb | tail -n +2 | tr '\t' ' ' > "$T/$arch.$p"
            if ! grep -qw "$flag" /proc/cpuinfo; then
                cmp "$T/$arch.f32" "$T/$arch.$p"
                grep -q -- "--precision $p: f32 products on cpu" "$T/err" || fail "$arch $p: no note: $(cat "$T/err")"
                continue
            fi
            ! grep -q 'f32 products on' "$T/err" || fail "$arch $p: a fallback note: $(cat "$T/err")"
            ! cmp -s "$T/$arch.f32" "$T/$arch.$p" || fail "$arch $p: f32's bytes"
            [ "$(wc -l < "$T/$arch.$p")" -eq 15 ]
            run py "$TESTS_DIR/lib/cosine.py" "$T/$arch.f32" "$T/$arch.$p" 0.999
            assert_success
        done
    done
}
