#!/usr/bin/env bats
# The manners every tool shares (CONVENTIONS.md), checked on each built tool:
# help, version, usage errors, devices, terminal refusal, atomic -o, quiet EPIPE.
load helpers
bats_require_minimum_version 1.5.0

tools() { for t in "$TQ_BIN"/tq-*; do basename "$t"; done; }

@test "--help goes to stdout, exits 0, lists the common options and examples" {
    for t in $(tools); do
        run --separate-stderr "$t" --help
        assert_success
        [ -z "$stderr" ] || fail "$t --help wrote to stderr"
        for opt in --output --force --quiet --verbose --device --list-devices --threads --seed --progress --help --version; do
            [[ "$output" == *"$opt"* ]] || fail "$t --help does not mention $opt"
        done
        [[ "$output" == *"Examples:"* ]] || fail "$t --help has no examples"
    done
}

@test "--version prints the library version" {
    v=$(sed -n 's/^#define TQ_VERSION "\(.*\)"/\1/p' "$ROOT_DIR/lib/tq.h")
    for t in $(tools); do
        run "$t" --version
        assert_success
        assert_output "$t $v"
    done
}

@test "unknown options and bad values: one line on stderr, exit 2" {
    for t in $(tools); do
        for args in "--no-such-option" "--threads 0" "--threads x" "--progress sometimes" "--device tpu" "--device cpu:x"; do
            run --separate-stderr "$t" $args </dev/null
            [ "$status" -eq 2 ] || fail "$t $args: status $status"
            [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ] || fail "$t $args: stderr: $stderr"
            [[ "$stderr" == "$t: error: "* ]] || fail "$t $args: stderr: $stderr"
        done
    done
}

@test "a bad option is named as coreutils names it, on all eight tools" {
    [ "$(tools | wc -l)" -eq 8 ] || fail "not eight tools: $(tools)"
    for t in $(tools); do
        see="; see '$t --help'"
        for case in "--top-k|unrecognized option '--top-k'" \
            "--top-k=3|unrecognized option '--top-k=3'" \
            "-y|invalid option -- 'y'" "-qy|invalid option -- 'y'" \
            "--output|option '--output' requires an argument" \
            "--outp|option '--output' requires an argument" \
            "-o|option requires an argument -- 'o'" \
            "--quiet=1|option '--quiet' doesn't allow an argument"; do
            args=${case%%|*} want=${case#*|}
            run --separate-stderr "$t" $args </dev/null
            [ "$status" -eq 2 ] || fail "$t $args: status $status"
            [ -z "$output" ] || fail "$t $args: stdout: $output"
            [ "$stderr" = "$t: error: $want$see" ] || fail "$t $args: stderr: $stderr"
        done
    done
}

@test "--list-devices names every backend, the CPU's BLAS kernel, and why the others are missing" {
    for t in $(tools); do
        run --separate-stderr "$t" --list-devices
        assert_success
        for b in cuda hip vulkan; do
            printf '%s\n' "$output" | grep -Eq "^$b(:[0-9]+)? " || fail "$t: no line for $b: $output"
        done
        cpu=$(printf '%s\n' "$output" | grep '^cpu ')
        [[ "$cpu" == *threads* ]] || fail "no thread count in: $cpu"
        [[ "$cpu" == *OpenBLAS*kernel* || "$cpu" == *built-in* ]] || fail "no BLAS kernel in: $cpu"
        # a backend that is not there always says why
        printf '%s\n' "$output" | grep unavailable | grep -Eqv 'unavailable: .+' && fail "bare unavailable"
        true
    done
}

@test "a named device that is not available is an error that says why (exit 1)" {
    if "$TQ_BIN/tq-cat" --list-devices | grep -q '^cuda:'; then skip "this machine has a CUDA device"; fi
    # stdin is given inside the command: what bats hands a `run` is not always empty
    run --separate-stderr bash -c 'tq-cat --device cuda </dev/null'
    [ "$status" -eq 1 ]
    [[ "$stderr" == "tq-cat: error: cuda"* ]]
    run --separate-stderr bash -c 'TQ_DEVICE=cuda tq-cat </dev/null'
    [ "$status" -eq 1 ]
    # the command line beats the environment
    run --separate-stderr bash -c 'TQ_DEVICE=cuda tq-cat --device cpu </dev/null'
    assert_success
}

@test "binary output to a terminal is refused with a hint; -f overrides" {
    command -v script >/dev/null || skip "script(1) from util-linux is not installed"
    run script -qec "$TQ_BIN/tq-cat < /dev/null" /dev/null
    [ "$status" -eq 2 ]
    [[ "$output" == *"refusing to write a binary stream to a terminal"* ]]
    run script -qec "$TQ_BIN/tq-cat -f < /dev/null" /dev/null
    assert_success
}

@test "-o writes atomically: a failed run leaves no file and no temporary behind" {
    needs_numpy
    d="$BATS_TEST_TMPDIR/out"; mkdir "$d"
    py -c "
import tqstream as t, numpy as np, sys
good = t.array_frame('x', np.ones((4, 3), np.float32))
sys.stdout.buffer.write(good + b'garbage that is not a frame')" > "$BATS_TEST_TMPDIR/bad.tq"
    run tq-cat -o "$d/result.tq" "$BATS_TEST_TMPDIR/bad.tq"
    [ "$status" -eq 65 ]
    [ -z "$(ls -A "$d")" ] || fail "left behind: $(ls -A "$d")"
    # and an existing file is left as it was
    echo previous > "$d/result.tq"
    run tq-cat -o "$d/result.tq" "$BATS_TEST_TMPDIR/bad.tq"
    [ "$status" -eq 65 ]
    [ "$(cat "$d/result.tq")" = previous ]
    [ "$(ls -A "$d")" = result.tq ]
}

@test "an interrupted run leaves no temporary file behind" {
    d="$BATS_TEST_TMPDIR/int"; mkdir "$d"
    mkfifo "$d/in"
    tq-cat -o "$d/result.tq" "$d/in" &
    pid=$!
    exec 7>"$d/in"       # keep the fifo open: tq-cat waits for data (bats owns fd 3)
    sleep 0.5
    kill -TERM "$pid"
    wait "$pid" || true
    exec 7>&-
    [ "$(ls -A "$d")" = in ] || fail "left behind: $(ls -A "$d")"
}

@test "a closed pipe downstream ends the tool quietly" {
    needs_numpy
    py -c "
import tqstream as t, numpy as np, sys
f = t.array_frame('x', np.zeros((4096, 1024), np.float32))
sys.stdout.buffer.write(f * 64)" > "$BATS_TEST_TMPDIR/big.tq"
    run --separate-stderr bash -c "tq-cat '$BATS_TEST_TMPDIR/big.tq' | head -c 10 > /dev/null; echo \${PIPESTATUS[0]}"
    assert_output 0
    [ -z "$stderr" ] || fail "stderr: $stderr"
}

@test "-o onto a device or a named pipe writes into it and leaves it what it was" {
    needs_numpy
    py -c "
import tqstream as t, numpy as np, sys
sys.stdout.buffer.write(t.array_frame('x', np.arange(12, dtype=np.float32).reshape(3, 4)))" > "$BATS_TEST_TMPDIR/in.tq"
    mkfifo "$BATS_TEST_TMPDIR/fifo"
    timeout 10 cat "$BATS_TEST_TMPDIR/fifo" > "$BATS_TEST_TMPDIR/got.tq" &
    run tq-cat -o "$BATS_TEST_TMPDIR/fifo" "$BATS_TEST_TMPDIR/in.tq"
    assert_success
    wait
    [ -p "$BATS_TEST_TMPDIR/fifo" ] || fail "the named pipe was replaced"
    cmp "$BATS_TEST_TMPDIR/in.tq" "$BATS_TEST_TMPDIR/got.tq"
    mkfifo "$BATS_TEST_TMPDIR/fifo2"
    timeout 10 cat "$BATS_TEST_TMPDIR/fifo2" > "$BATS_TEST_TMPDIR/got.tsv" &
    run tq-cat -t tsv -o "$BATS_TEST_TMPDIR/fifo2" "$BATS_TEST_TMPDIR/in.tq"
    assert_success
    wait
    [ -p "$BATS_TEST_TMPDIR/fifo2" ] || fail "the named pipe was replaced (text output)"
    [ "$(sed -n 2p "$BATS_TEST_TMPDIR/got.tsv")" = "$(printf '0\t1\t2\t3')" ]
    # and the device everyone shares stays a device
    run tq-cat -o /dev/null "$BATS_TEST_TMPDIR/in.tq"
    assert_success
    [ -c /dev/null ] || fail "/dev/null is no longer a character device"
}

@test "an empty input and a stream without the tool's vectors, tool by tool" {
    cd "$BATS_TEST_TMPDIR"
    printf 'a b\nc d\n' | tq-embed -m hash:8 > e.tq
    tq-cat --name key e.tq > keys.tq
    # tool | status on 0 bytes | status on keys only | its message on keys only
    # An empty stream (no frame at all) asks nothing: tools that answer
    # queries (tq-simmat --db, tq-score, tq-quantize, tq-attend --kv) write
    # nothing, exit 0; tq-attend --self and tq-train, which need their input's
    # rows, say so (65).
    # Frames without the tool's vectors are an error, never passed back.
    while IFS='|' read -r cmd empty keys msg; do
        run --separate-stderr bash -c "$cmd < /dev/null"
        [ "$status" -eq "$empty" ] || fail "$cmd < empty: status $status: $stderr"
        [ -z "$output" ] || fail "$cmd < empty: wrote ${#output} bytes"
        [ "$empty" -ne 0 ] || [ -z "$stderr" ] || fail "$cmd < empty: stderr: $stderr"
        run --separate-stderr bash -c "$cmd < keys.tq"
        [ "$status" -eq "$keys" ] || fail "$cmd < keys: status $status: $stderr"
        [ "$keys" -eq 0 ] || [ -z "$output" ] || fail "$cmd < keys: wrote ${#output} bytes"
        [ "$stderr" = "$msg" ] || fail "$cmd < keys: stderr: $stderr"
    done <<'TABLE'
tq-cat|0|0|
tq-simmat --db e.tq -k 1|0|65|tq-simmat: error: no query vectors in standard input: no frame "emb" among its frames ("key"): give vectors (tq-embed, tq-quantize) or name their frame with --name
tq-simmat --db e.tq --dedup 0.9|0|65|tq-simmat: error: no query vectors in standard input: no frame "emb" among its frames ("key"): give vectors (tq-embed, tq-quantize) or name their frame with --name
tq-score --consensus|0|65|tq-score: error: no candidates in standard input: none of its frames ("key") is a rank 2 float or code frame (as tq-embed or tq-quantize writes them)
tq-score --consensus --emb emb|0|65|tq-score: error: no candidates in standard input: no frame "emb" among its frames ("key"): give vectors (tq-embed, tq-quantize) or name their frame with --emb
tq-quantize --to int8|0|65|tq-quantize: error: no frame to quantize in standard input: none of its frames ("key") is a float frame other than key (as tq-embed writes them)
tq-quantize --to int8 --name emb|0|65|tq-quantize: error: no frame to quantize in standard input: no frame "emb" among its frames ("key")
tq-quantize --to f32|0|65|tq-quantize: error: no frame to dequantize in standard input: none of its frames ("key") is tq-quantize's codes
tq-attend --kv e.tq|0|65|tq-attend: error: no frame "emb" (queries) in the input
tq-attend --self|65|65|tq-attend: error: no frame "emb" (queries) in the input
tq-train|65|65|tq-train: error: stdin: no features: no rank 2 float frame
TABLE
}

@test "an input file is named once in an error: missing, truncated, corrupt, a folder, with every tool" {
    cd "$BATS_TEST_TMPDIR"
    printf 'a b\nc d\n' | tq-embed -m hash:8 > e.tq
    head -c 100 e.tq > cut.tq
    printf '\1\2\3\4 corrupt corrupt corrupt corrupt corrupt corrupt corrupt corrupt' > bad.tq
    mkdir dir.tq
    while read -r cmd; do
        for f in none.tq cut.tq bad.tq dir.tq; do
            run --separate-stderr bash -c "${cmd//F/$f}"
            [ "$status" -ne 0 ] || fail "$cmd ($f): exit 0"
            [ "${#stderr_lines[@]}" -eq 1 ] || fail "$cmd ($f): stderr: $stderr"
            n=$(grep -o "$f" <<<"$stderr" | wc -l)
            [ "$n" -eq 1 ] || fail "$cmd ($f): $f named $n times: $stderr"
        done
    done <<'CMDS'
tq-cat F
tq-cat --info F
tq-cat --from npy F
tq-simmat F
tq-simmat --db F -k 1 < e.tq
tq-simmat --db F --dedup 0.9 < e.tq
tq-simmat --merge F
tq-attend --kv F < e.tq
tq-attend --self --weights F < e.tq
tq-score --consensus F
tq-score --query F < e.tq
tq-score -m F < e.tq
tq-quantize --to int8 F
tq-quantize --to int8 --ranges F < e.tq
tq-quantize --to uint8 --ranges F < e.tq
tq-train F
tq-embed --jsonl F
tq-bench --compare F F
CMDS
}
