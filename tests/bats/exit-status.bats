#!/usr/bin/env bats
# The one table of exit statuses (tq(7) EXIT STATUS, CONVENTIONS.md): every
# tool driven through every failure class, each held to its status, to one
# line on stderr of the shape "tq-TOOL: error: ...", to the words that say the
# class, and to leaving no output file and no temporary file behind.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    cd "$BATS_TEST_TMPDIR"
    cp "$ROOT_DIR/samples/blobs.tq" good.tq # emb [90 x 2], y [90] in 0..2
    cp "$ROOT_DIR/samples/scorer.tq" scorer.tq
    printf 'one line of text\nand another\n' > text.txt
    # a frame header cut short: bad data
    head -c 40 good.tq > bad.tq
    printf 'not json' > bad.json
    # a frame of 195 MiB whose payload is a hole (no disk used; its checksum
    # is wrong): under an address-space limit its buffer cannot be had (out of
    # memory) before the checksum is reached
    py -c "
import tqstream as t
f = open('huge.tq', 'wb')
f.write(t.frame('emb', 'f32', [50000, 1024], b'', stored_size=204800000, raw_size=204800000))
f.truncate(f.tell() + 204800000)"
    # a fastText model's magic and 300 MiB of holes: its map cannot be had
    py -c "
import struct
f = open('huge.bin', 'wb'); f.write(struct.pack('<i', 793712314)); f.truncate(300 << 20)"
}

# expect STATUS WORDS TOOL ARGS...: runs the tool here on /dev/null input
# (unless ARGS redirect), checks the status, one line "TOOL: error: ..."
# holding WORDS, no file "out" and nothing new in the folder.
expect() {
    local want=$1 words=$2 tool=$3
    shift 3
    local before after
    before=$(ls -A | grep -v '^separate-stderr-' | sort)
    run --separate-stderr "$tool" "$@"
    after=$(ls -A | grep -v '^separate-stderr-' | sort)
    local what="$tool $*"
    [ "$status" -eq "$want" ] || fail "$what: status $status, not $want: $stderr"
    [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ] || fail "$what: more than one line: $stderr"
    [[ "$stderr" == "$tool: error: "* ]] || fail "$what: not '$tool: error: ...': $stderr"
    [[ "$stderr" == *"$words"* ]] || fail "$what: '$words' not said: $stderr"
    [ ! -e out ] || fail "$what: left its output file"
    [ "$before" = "$after" ] || fail "$what: left files: $(comm -13 <(echo "$before") <(echo "$after"))"
}

# Each tool's way to read a stream file IN (tq-embed reads text, tq-bench its
# --compare reports); the rest of a working command line after it.
in_args() {
    case $1 in
    tq-cat | tq-quantize | tq-train | tq-score) echo "$2" ;;
    tq-simmat) echo "--db $2" ;;
    tq-attend) echo "--kv $2" ;;
    tq-embed) echo "-m hash:16 $2" ;;
    tq-bench) echo "--compare $2 $ROOT_DIR/samples/bench-new.json" ;;
    esac
}
rest_args() {
    case $1 in
    tq-cat) echo "" ;;
    tq-quantize) echo "--to int8" ;;
    tq-train) echo "--model softmax --y y" ;;
    tq-score) echo "-m scorer.tq" ;;
    tq-simmat) echo "-k 2" ;;
    tq-attend) echo "" ;;
    tq-embed) echo "" ;;
    tq-bench) echo "" ;;
    esac
}
tools="tq-cat tq-simmat tq-score tq-quantize tq-attend tq-embed tq-train tq-bench"

@test "exit 2: usage, for every tool" {
    for t in $tools; do
        expect 2 "; see '$t --help'" "$t" --no-such-option
        expect 2 "--threads" "$t" --threads 0
    done
}

@test "exit 65: bad data, for every tool" {
    expect 65 "bad.tq" tq-cat bad.tq
    expect 65 "stdin" tq-simmat -k 2 <bad.tq
    expect 65 "bad.tq" tq-simmat -k 2 --db bad.tq <good.tq
    expect 65 "stdin" tq-score -m scorer.tq <bad.tq
    expect 65 "bad.tq" tq-score -m bad.tq <good.tq
    expect 65 "bad.tq" tq-quantize --to int8 bad.tq
    expect 65 "stdin" tq-attend --self <bad.tq
    expect 65 "bad.tq" tq-attend --kv bad.tq <good.tq
    expect 65 "bad.tq" tq-train --model softmax --y y bad.tq
    expect 65 "bad.tq" tq-embed -m bad.tq text.txt # a .vec model that is not one
    expect 65 "bad.json" tq-bench --compare bad.json "$ROOT_DIR/samples/bench-new.json"
}

@test "exit 65: rows of 0 values, even 5e8 of them declared with no payload, at once" {
    py -c "
import sys, tqstream as t
sys.stdout.buffer.write(t.frame('emb', 'f32', [500000000, 0], b''))" > wide0.tq
    # each tool would owe every row a result (or a scale): 19 GB and minutes
    # in tq-simmat before this was refused
    expect 65 "500000000 rows of 0 values" tq-simmat -k 2 -o out <wide0.tq
    expect 65 "500000000 rows of 0 values" tq-simmat -k 2 --db wide0.tq -o out <good.tq
    expect 65 "500000000 rows of 0 values" tq-simmat --dedup 0.9 -o out <wide0.tq
    expect 65 "500000000 rows of 0 values" tq-score --consensus -o out <wide0.tq
    expect 65 "500000000 rows of 0 values" tq-quantize --to int8 -o out wide0.tq
    expect 65 "500000000 rows of 0 values" tq-attend --self -o out <wide0.tq
    # tq-cat converts what it is given: the frame passes, at no cost
    run tq-cat wide0.tq -o out
    assert_success
    cmp out wide0.tq
}

@test "exit 66: an input that cannot be opened, or is a directory, for every tool" {
    mkdir folder
    for t in $tools; do
        # shellcheck disable=SC2046
        expect 66 "no-such.tq: cannot open: No such file or directory" "$t" \
            $(in_args $t no-such.tq) $(rest_args $t) -o out </dev/null
        # shellcheck disable=SC2046
        expect 66 "folder: cannot open: Is a directory" "$t" \
            $(in_args $t folder) $(rest_args $t) -o out <good.tq
    done
}

@test "exit 73: an output that cannot be created, found before any work, for every tool" {
    mkdir folder
    for t in $tools; do
        # shellcheck disable=SC2046
        expect 73 "no-dir/out: cannot create: No such file or directory" "$t" \
            $(in_args $t good.tq) $(rest_args $t) -o no-dir/out <good.tq
    done
    expect 73 "no-dir/out: cannot create" tq-bench --compare "$ROOT_DIR/samples/bench-old.json" \
        "$ROOT_DIR/samples/bench-new.json" -o no-dir/out
    # the outputs written at the end of a run: refused at its start, and the
    # main output is not left behind
    expect 73 "no-dir/r.tq: cannot create" tq-quantize --to int8 --report no-dir/r.tq -o out good.tq
    expect 73 "folder: cannot create: Is a directory" tq-quantize --to int8 --report folder -o out good.tq
    expect 73 "no-dir/log.tq: cannot create" tq-train --model softmax --y y --log no-dir/log.tq -o out good.tq
    expect 73 "no-dir/p.svg: cannot create" tq-train --model softmax --y y --plot no-dir/p.svg -o out good.tq
    expect 73 "no-dir/c.tq: cannot create" tq-train --model softmax --y y --checkpoint no-dir/c.tq -o out good.tq
    expect 73 "no-dir/b.svg: cannot create" tq-bench --op matmul -n 16 -r 1 --device cpu --svg no-dir/b.svg -o out
}

@test "exit 74: an I/O error (a full disk), for every tool" {
    [ -w /dev/full ] || skip "/dev/full is not there to write to"
    expect 74 "/dev/full: write failed: No space left on device" tq-cat good.tq -o /dev/full
    expect 74 "/dev/full: write failed" tq-simmat -k 2 -o /dev/full <good.tq
    expect 74 "/dev/full: write failed" tq-score -m scorer.tq -o /dev/full <good.tq
    expect 74 "/dev/full: write failed" tq-quantize --to int8 -o /dev/full good.tq
    expect 74 "/dev/full: write failed" tq-attend --self -o /dev/full <good.tq
    expect 74 "/dev/full: write failed" tq-embed -m hash:16 text.txt -o /dev/full
    expect 74 "/dev/full: write failed" tq-train --model softmax --y y -o /dev/full good.tq
    expect 74 "/dev/full: write failed" tq-bench --compare "$ROOT_DIR/samples/bench-old.json" \
        "$ROOT_DIR/samples/bench-new.json" -o /dev/full
}

@test "exit 1: out of memory under an address-space limit, for every tool, and no hang" {
    case "$TQ_BIN" in */san/*) skip "AddressSanitizer's shadow memory cannot run under ulimit -v" ;; esac
    # 150 MB, as a batch job may be given: the tools start (OpenBLAS is not
    # loaded under such a limit: it would retry its buffer forever) and fail
    # on the one allocation that cannot be had
    lim() { (ulimit -v 150000 && exec timeout 60 "$@"); }
    for t in tq-cat tq-quantize tq-simmat tq-attend tq-score tq-train; do
        args=$(rest_args $t | sed 's/-m scorer.tq/--consensus/')
        [ $t = tq-attend ] && args=--self
        # shellcheck disable=SC2086
        run --separate-stderr lim "$TQ_BIN/$t" $args -o out <huge.tq
        [ "$status" -eq 1 ] || fail "$t: status $status: $stderr"
        [[ "$stderr" == "$t: error: "*"out of memory"* ]] || fail "$t: $stderr"
        [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ] || fail "$t: $stderr"
        [ ! -e out ] || fail "$t: left its output"
    done
    run --separate-stderr lim "$TQ_BIN/tq-embed" -m huge.bin text.txt -o out
    [ "$status" -eq 1 ] && [[ "$stderr" == "tq-embed: error: huge.bin: "*"out of memory" ]] ||
        fail "tq-embed: status $status: $stderr"
    run --separate-stderr lim "$TQ_BIN/tq-bench" --op matmul -n 8192 -r 1 --device cpu -o out
    [ "$status" -eq 1 ] && [[ "$stderr" == "tq-bench: error: "*"out of memory"* ]] ||
        fail "tq-bench: status $status: $stderr"
    # a small job under the same limit answers, as without it (the search's
    # products, large enough for OpenBLAS otherwise, on the built-in kernel)
    py -c "
import numpy as np, tqstream as t, sys
x = np.random.default_rng(3).standard_normal((2000, 16)).astype(np.float32)
sys.stdout.buffer.write(t.array_frame('emb', x))" > mid.tq
    tq-simmat -k 5 --device cpu -o free.tq <mid.tq
    run lim "$TQ_BIN/tq-simmat" -k 5 --device cpu -o limited.tq <mid.tq
    assert_success
    py -c "
import numpy as np, tqstream as t
a, b = ({f['name']: t.to_numpy(f) for f in t.read(open(p, 'rb').read())}
        for p in ('free.tq', 'limited.tq'))
# the same lists; scores within a few ulp (the two sgemm kernels sum in
# different orders, 16 terms)
assert (a['idx'] == b['idx']).all(), 'indices differ'
assert np.allclose(a['score'], b['score'], rtol=1e-5, atol=1e-6), 'scores differ'"
    rm -f free.tq limited.tq mid.tq
    # the listing of devices, which loads every runtime, ends too
    run --separate-stderr lim "$TQ_BIN/tq-cat" --list-devices
    assert_success
    [[ "$output" == *"OpenBLAS not used under an address-space limit"* ]] || fail "$output"
    # and the same input without the limit is bad data (its checksum), so the
    # status above was the limit's
    expect 65 "huge.tq" tq-cat huge.tq -o out
}

@test "exit 1: a device that is not there, for every tool" {
    for t in $tools; do
        [ $t = tq-bench ] && continue
        # shellcheck disable=SC2046
        expect 1 "vulkan" "$t" --device vulkan:99 $(in_args $t good.tq) $(rest_args $t) -o out <text.txt
    done
    # tq-bench's --device takes a list, for the runs that time ops
    expect 1 "vulkan" tq-bench --device vulkan:99 --op matmul -n 16 -r 1 -o out
}
