#!/usr/bin/env bats
# Bash completion (cmd/tq.bash-completion, installed by make install): sourced
# here, then asked to complete words as bash would (COMP_WORDS, COMP_CWORD),
# and COMPREPLY checked against what the tools themselves say: their --help,
# --list-devices, and tq-cat --info of the stream on the command line.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    cd "$BATS_TEST_TMPDIR"
    COMPLETION=${COMPLETION:-$ROOT_DIR/cmd/tq.bash-completion}
    # shellcheck source=/dev/null
    . "$COMPLETION"
    tq-cat --from csv --as emb "$ROOT_DIR/samples/vectors.csv" > v.tq
}

# comp CWORD WORD...: completes word CWORD of the command line WORD...
comp() {
    COMP_CWORD=$1
    shift
    COMP_WORDS=("$@")
    COMPREPLY=()
    local fn
    fn=$(complete -p "$1" | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
    [ -n "$fn" ] || return 1
    "$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
}

@test "completion: every tool is registered, its options come from its --help" {
    # every tool make install installs the file for (cmd/tq-*.c)
    for src in "$ROOT_DIR"/cmd/tq-*.c; do
        tool=$(basename "$src" .c)
        complete -p "$tool" > /dev/null
        comp 1 "$tool" --
        # every long option --help lists (before its examples) is offered,
        # digits too (--l2, --beta1)
        want=$("$tool" --help | sed '/^Examples:/,$d' | grep -oE '(^|[ ,])--[A-Za-z][-A-Za-z0-9]*' | tr -d ' ,' | sort -u)
        got=$(printf '%s\n' "${COMPREPLY[@]}" | grep '^--' | sort -u)
        [ "$got" = "$want" ] || { echo "$tool: got [$got] want [$want]"; return 1; }
    done
    comp 1 tq-simmat --me
    [ "${COMPREPLY[*]}" = "--merge --metric" ]
    comp 1 tq-train --beta
    [ "${COMPREPLY[*]}" = "--beta1 --beta2" ]
    comp 2 tq-simmat --metric ""
    [ "${COMPREPLY[*]}" = "cosine dot l2" ]
    # files where a file goes: -o, --db, and the arguments
    comp 2 tq-cat -o v.
    [ "${COMPREPLY[*]}" = "v.tq" ]
    comp 4 tq-simmat -k 3 --db v
    [ "${COMPREPLY[*]}" = "v.tq" ]
    comp 1 tq-cat v
    [ "${COMPREPLY[*]}" = "v.tq" ]
}

@test "completion: --device offers auto and what --list-devices has" {
    comp 2 tq-attend --device ""
    [ "${COMPREPLY[0]}" = auto ]
    printf '%s\n' "${COMPREPLY[@]}" | grep -qx cpu
    # a backend --list-devices calls unavailable is not offered
    for d in $(tq-cat --list-devices | awk '$2 == "unavailable:" { print $1 }'); do
        [ "$(printf '%s\n' "${COMPREPLY[@]}" | grep -cx "$d")" -eq 0 ]
    done
    comp 2 tq-cat --device c
    [ "${COMPREPLY[*]}" = cpu ]
}

@test "completion: frame names from the stream already on the command line" {
    py -c '
import numpy as np, tqstream as tq
x = np.ones((2, 3), np.float32)
open("kv.tq", "wb").write(tq.array_frame("keys", x) + tq.array_frame("vals", x))'
    # tq-cat --name: the FILE argument, after the cursor too; a comma list
    comp 4 tq-cat -t tsv --name "" v.tq
    [ "${COMPREPLY[*]}" = "key emb" ]
    comp 2 tq-cat --name key,e v.tq
    [ "${COMPREPLY[*]}" = "key,emb" ]
    # tq-attend --q: the stream on standard input (< FILE); --k: the --kv FILE
    comp 3 tq-attend --self --q "" "<" v.tq
    [ "${COMPREPLY[*]}" = "key emb" ]
    comp 4 tq-attend --kv kv.tq --k "" "<" v.tq
    [ "${COMPREPLY[*]}" = "keys vals" ]
    # tq-simmat --name: the --db FILE; no stream named: nothing offered
    comp 4 tq-simmat --db v.tq --name e
    [ "${COMPREPLY[*]}" = "emb" ]
    comp 2 tq-score --emb ""
    [ "${#COMPREPLY[@]}" -eq 0 ]
}

@test "completion: --precision offers the values tq-embed and tq-train take" {
    comp 2 tq-embed --precision ""
    [ "${COMPREPLY[*]}" = "f32 bf16 f16 int8" ]
    for p in "${COMPREPLY[@]}"; do
        run -0 tq-embed --precision "$p" -o out.tq /dev/null
    done
    run -2 tq-embed --precision int4 -o out.tq /dev/null
    comp 2 tq-embed --precision b
    [ "${COMPREPLY[*]}" = bf16 ]
    # tq-train has no int8 products
    comp 2 tq-train --precision ""
    [ "${COMPREPLY[*]}" = "f32 bf16 f16" ]
    run -2 tq-train --precision int8 --help
    # tq-score: how a model of i8 weights computes
    comp 2 tq-score --precision ""
    [ "${COMPREPLY[*]}" = "auto f32 int8" ]
    # tq-simmat: the products that rank --topk's candidates
    comp 2 tq-simmat --precision ""
    [ "${COMPREPLY[*]}" = "f32 bf16" ]
    run -2 tq-simmat --precision f16 -k 1 /dev/null
}
