#!/usr/bin/env bats
# fastText models (.bin, .ftz) and .vec word vectors through the embedder
# interface: vectors against the real `fasttext print-sentence-vectors` on models
# it trains here, .vec averages against numpy, and corrupt or truncated models,
# which must fail with exit 65 and one line naming the file.
load helpers

FT=/usr/bin/fasttext

setup_file() {
    export WORK="$BATS_FILE_TMPDIR"
    # the driver links the library the suite tests (the sanitized one under SAN=1)
    local lib="$TQ_BIN/../lib/libtq.a" san=
    case "$TQ_BIN" in */san/*) san="-fsanitize=address,undefined" ;; esac
    cc -std=c11 -D_GNU_SOURCE -O1 $san -I"$ROOT_DIR/lib" "$ROOT_DIR/tests/fasttext/ft-embed.c" \
        "$lib" -lz -ldl -lm -pthread -o "$WORK/ft-embed"
    if [ -x "$FT" ]; then
        printf '%s\n' "__label__a ka to ri mu" "__label__b sen ló über na" "__label__a qi zé 日本 語" \
            "__label__b ka ka to to" "__label__a ri mu sen ló" > "$WORK/small.txt"
        for i in 1 2 3 4 5 6; do cat "$WORK/small.txt"; done > "$WORK/train.txt"
        "$FT" supervised -input "$WORK/train.txt" -output "$WORK/m" -dim 8 -epoch 1 -minn 2 -maxn 3 \
            -wordNgrams 2 -bucket 300 -thread 1 -verbose 0 -seed 3
        "$FT" skipgram -input "$WORK/train.txt" -output "$WORK/sg" -dim 8 -epoch 1 -minCount 1 \
            -bucket 300 -thread 1 -verbose 0 -seed 3
        "$FT" quantize -input "$WORK/train.txt" -output "$WORK/m" -dsub 2 -qnorm -thread 1 -verbose 0
    fi
}

needs_fasttext() {
    [ -x "$FT" ] || skip "fasttext is not installed (Debian package fasttext): no reference to compare with"
}

@test "vectors match fasttext print-sentence-vectors (supervised, skipgram, cbow, subwords, word n-grams, quantized)" {
    needs_fasttext
    needs_numpy
    run "$PY" "$ROOT_DIR/tests/fasttext/compare.py" "$WORK/ft-embed" "$WORK/cmp" 2
    echo "$output"
    assert_success
    [ "$(grep -c '^ok ' <<<"$output")" -eq 11 ]
}

@test "the same vectors on 1 and 2 threads, bit for bit" {
    needs_fasttext
    for i in $(seq 200); do echo "ka to ri $i mu sen über 日本 $((i * 7))"; done > "$WORK/lines.txt"
    "$WORK/ft-embed" "$WORK/m.bin" 1 < "$WORK/lines.txt" > "$WORK/t1"
    "$WORK/ft-embed" "$WORK/m.bin" 2 < "$WORK/lines.txt" > "$WORK/t2"
    [ "$(wc -l < "$WORK/t1")" -eq 200 ]
    cmp "$WORK/t1" "$WORK/t2"
}

@test ".vec word vectors: the plain average of the known words, zero when none is known" {
    needs_fasttext
    needs_numpy
    printf '%s\n' "ka to zzz" "über" "nothing known here" "" "sen ló ló" > "$WORK/v.txt"
    "$WORK/ft-embed" "$WORK/sg.vec" < "$WORK/v.txt" > "$WORK/v.out"
    run py - "$WORK/sg.vec" "$WORK/v.txt" "$WORK/v.out" <<'PY'
import sys, numpy as np
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
vec = {}
for l in lines[1:]:
    f = l.split()
    vec.setdefault(f[0], np.array(f[1:], dtype=np.float64))
dim = int(lines[0].split()[1])
ours = np.loadtxt(sys.argv[3], ndmin=2)
for i, text in enumerate(open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]):
    known = [vec[w] for w in text.split() if w in vec]
    want = np.mean(known, axis=0) if known else np.zeros(dim)
    # float32 sums of a few float32 values: 1e-6 of the norm is ample
    err = np.linalg.norm(ours[i] - want)
    assert err <= 1e-6 * max(np.linalg.norm(want), 1e-30) or (not known and err == 0), (i, err)
print("ok", len(ours))
PY
    assert_output "ok 5"
}

# check_bad FILE: the driver must exit 65 with one line naming FILE.
check_bad() {
    run "$WORK/ft-embed" "$1" < /dev/null
    [ "$status" -eq 65 ] || fail "$1: exit $status, want 65: $output"
    [ "${#lines[@]}" -eq 1 ] || fail "$1: ${#lines[@]} lines of error: $output"
    [[ "$output" == *"$1"* ]] || fail "$1: message does not name the file: $output"
}

@test "truncated models (.bin and .ftz) fail with exit 65 and one line, at every part of the file" {
    needs_fasttext
    for m in m.bin m.ftz; do
        size=$(stat -c %s "$WORK/$m")
        # every byte of the header, arguments and dictionary start, then spread points
        cuts="$(seq 0 90) $(seq 100 $((size / 23 + 1)) $((size - 1))) $((size - 1))"
        for cut in $cuts; do
            head -c "$cut" "$WORK/$m" > "$WORK/cut.bin"
            check_bad "$WORK/cut.bin"
        done
    done
}

@test "corrupt header fields fail with exit 65 and say what is wrong" {
    needs_fasttext
    # offset (bytes), little-endian int32 to write there, part of the expected message
    while read -r off hex msg; do
        cp "$WORK/m.bin" "$WORK/bad.bin"
        printf "$hex" | dd of="$WORK/bad.bin" bs=1 seek="$off" conv=notrunc status=none
        check_bad "$WORK/bad.bin"
        [[ "$output" == *"$msg"* ]] || fail "offset $off: want '$msg' in: $output"
    done <<'EOF'
4 \x63\x00\x00\x00 format version 99
8 \x00\x00\x00\x00 dim 0
36 \x09\x00\x00\x00 model 9
40 \xfb\xff\xff\xff bucket -5
64 \xff\xff\xff\x7f dictionary
68 \xfe\xff\xff\xff dictionary
EOF
    # the first dictionary entry's type byte (after the dictionary header, "</s>\0" and its count)
    cp "$WORK/m.bin" "$WORK/bad.bin"
    printf '\x07' | dd of="$WORK/bad.bin" bs=1 seek=$((64 + 28 + 5 + 8)) conv=notrunc status=none
    check_bad "$WORK/bad.bin"
    [[ "$output" == *"type 7"* ]] || fail "$output"
}

@test "random byte flips in the header and dictionary never crash: exit 0 or 65" {
    needs_fasttext
    size=$(stat -c %s "$WORK/m.ftz")
    for i in $(seq 60); do
        cp "$WORK/m.ftz" "$WORK/flip.ftz"
        off=$(( (i * 7919) % 400 + 8 ))
        printf "\\x$(printf %02x $(( (i * 37 + 101) % 256 )))" |
            dd of="$WORK/flip.ftz" bs=1 seek="$off" conv=notrunc status=none
        run "$WORK/ft-embed" "$WORK/flip.ftz" <<<"ka to ri über"
        [ "$status" -eq 0 ] || [ "$status" -eq 65 ] || fail "flip at $off: exit $status: $output"
    done
}

@test "a missing model exits 66; corrupt .vec lines exit 65 with the line number" {
    run "$WORK/ft-embed" "$WORK/none.bin" < /dev/null
    assert_equal "$status" 66
    printf '2 3\nab 1 2 3\ncd 1 2\n' > "$WORK/bad.vec"
    check_bad "$WORK/bad.vec"
    assert_output --partial "line 3"
}
