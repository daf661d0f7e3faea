#!/usr/bin/env bats
# format.bats: the TQ stream format (tq-format.5) as tq-cat reads it. Every
# stream here is made by tests/lib/tqstream.py, which shares no code with libtq;
# every malformed one must be refused with exit 65 and one line naming the input,
# the frame, its name once known, and the byte offset the page gives for it.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
}

# Python run before each crafting script: the format library, numpy, and a few
# helpers for the frames most cases start from.
PRELUDE='
import struct, sys, zlib
import numpy as np
import tqstream as t

def f32(name="emb", rows=2, cols=3, **kw):
    a = (np.arange(rows * cols, dtype="<f4").reshape(rows, cols) + 0.5)
    return t.frame(name, "f32", [rows, cols], a.tobytes(), **kw)

def hlen(b):
    return struct.unpack_from("<I", b, 16)[0]

def recrc(b):
    """The frame b (alone) with its header CRC made right again."""
    hl = hlen(b)
    return b[:44] + struct.pack("<I", t.crc32c(b[48:hl], t.crc32c(b[:44]))) + b[48:]

def patch(b, off, data, crc=True):
    b = b[:off] + data + b[off + len(data):]
    return recrc(b) if crc else b

def strs(offsets, data, **kw):
    """A str frame from raw offsets and bytes."""
    n = len(offsets) - 1
    return t.frame("txt", "str", [n], struct.pack("<%dQ" % len(offsets), *offsets) + data, **kw)

def zframe(stored, raw_size, name="emb", dims=(2, 3), dtype="f32"):
    """A frame flagged zlib whose stored bytes are given as they are."""
    return t.frame(name, dtype, list(dims), stored, flags=1, raw_size=raw_size)

RAW = (np.arange(6, dtype="<f4") + 0.5).tobytes()
'

# craft FILE PYTHON: runs PYTHON after the prelude; it sets S, the bytes of FILE.
craft() {
    "$PY" -c "$PRELUDE
$2
sys.stdout.buffer.write(S)" >"$1"
}

# pyval PYTHON-EXPRESSION: prints its value (after the prelude).
pyval() { "$PY" -c "$PRELUDE
print($1)"; }

# expect_bad FILE INDEX NAME OFFSET WHY: tq-cat, passing FILE through and with
# --info, from a file, from standard input and from a pipe, fails with 65 and
# exactly one line: "tq-cat: error: INPUT: frame INDEX "NAME", byte OFFSET: ..."
# (no name part when NAME is empty) whose end matches the regex WHY.
expect_bad() {
    local file="$1" idx="$2" name="$3" off="$4" why="$5" where label cmd
    if [ -n "$name" ]; then
        where="frame $idx \"$name\", byte $off"
    else
        where="frame $idx, byte $off"
    fi
    for cmd in 'tq-cat "$1" >/dev/null' 'tq-cat <"$1" >/dev/null' 'cat "$1" | tq-cat >/dev/null' \
        'tq-cat --info "$1" >/dev/null' 'tq-cat --info <"$1" >/dev/null' \
        'cat "$1" | tq-cat --info >/dev/null' 'tq-cat -Z "$1" >/dev/null'; do
        case "$cmd" in *'<'* | *'|'*) label=stdin ;; *) label="$file" ;; esac
        run --separate-stderr bash -o pipefail -c "$cmd" _ "$file"
        local prefix="tq-cat: error: $label: $where: "
        if [ "$status" -ne 65 ] || [ "${#stderr_lines[@]}" -ne 1 ] ||
            [[ "$stderr" != "$prefix"* ]] || ! [[ "${stderr#"$prefix"}" =~ $why ]]; then
            printf 'command: %s\nstatus: %s\nstderr:\n%s\nexpected: %s/%s/\n' "$cmd" "$status" \
                "$stderr" "$prefix" "$why" >&2
            return 1
        fi
    done
}

# ------------------------------------------------------------ the fixed header

@test "bad magic: in the first frame and in a later one, and trailing junk" {
    craft a.tq 'S = b"TQF\x89" + f32()[4:]'
    expect_bad a.tq 0 "" 0 'bad magic'
    craft b.tq 'S = f32() + f32()[:4].replace(b"Q", b"q") + f32()[4:]'
    expect_bad b.tq 1 "" "$(pyval 'len(f32())')" 'bad magic'
    craft c.tq 'S = f32() + f32() + b"\n"'
    expect_bad c.tq 2 "" "$(pyval '2 * len(f32())')" 'bad magic'
    printf 'name,value\n1,2\n' >d.tq
    expect_bad d.tq 0 "" 0 'bad magic: not a TQ stream'
}

@test "unknown format version" {
    craft a.tq 'S = f32(version=2)'
    expect_bad a.tq 0 "" 4 'unknown format version 2'
    craft b.tq 'S = f32() + f32(version=0)'
    expect_bad b.tq 1 "" "$(pyval 'len(f32()) + 4')" 'unknown format version 0'
}

@test "unknown dtype code" {
    craft a.tq 'S = f32(dtype_code=15)'
    expect_bad a.tq 0 emb 6 'unknown dtype code 15'
    craft b.tq 'S = f32(dtype_code=0)'
    expect_bad b.tq 0 emb 6 'unknown dtype code 0'
    craft c.tq 'S = f32(dtype_code=0xffff)'
    expect_bad c.tq 0 emb 6 'unknown dtype code 65535'
}

@test "rank over 8" {
    craft a.tq 'S = t.frame("emb", "f32", [1] * 9, b"\0" * 4)'
    expect_bad a.tq 0 "" 8 'rank 9 is over the limit of 8'
    craft b.tq 'S = f32(rank=255)'
    expect_bad b.tq 0 "" 8 'rank 255'
}

@test "truncated fixed header, first and later frame" {
    craft a.tq 'S = f32()[:20]'
    expect_bad a.tq 0 "" 20 'truncated header: 20 of 48 bytes'
    craft b.tq 'S = f32() + f32()[:47]'
    expect_bad b.tq 1 "" "$(pyval 'len(f32()) + 47')" 'truncated header: 47 of 48'
    craft c.tq 'S = f32()[:1]'
    expect_bad c.tq 0 "" 1 'truncated header: 1 of 48'
}

@test "truncated rest of header" {
    craft a.tq 'S = f32()[:100]'
    [ "$(pyval 'hlen(f32())')" -eq 128 ]
    expect_bad a.tq 0 "" 100 'truncated header: 100 of 128 bytes'
    craft b.tq 'S = f32()[:48]'
    expect_bad b.tq 0 "" 48 'truncated header: 48 of 128'
}

@test "truncated payload, in the payload and in its padding" {
    craft a.tq 'S = f32()[:128 + 10]'
    expect_bad a.tq 0 emb 138 'truncated payload: 10 of 64 bytes'
    craft b.tq 'S = f32()[:-1]'
    expect_bad b.tq 0 emb "$(pyval 'len(f32()) - 1')" 'truncated payload: 63 of 64'
    craft c.tq 'S = f32() + f32()[:128]'
    expect_bad c.tq 1 emb "$(pyval 'len(f32()) + 128')" 'truncated payload: 0 of 64'
}

@test "truncated 2 MiB payload: read from a file (mapped) and from a pipe alike" {
    craft a.tq 'a = np.ones((512, 1024), "<f4"); S = t.array_frame("big", a)[:-100000]'
    expect_bad a.tq 0 big "$(pyval '128 + 2**21 - 100000')" 'truncated payload: 1997152 of 2097152'
}

@test "a header claiming 60 GiB on a short stream fails fast, without allocating it" {
    # 60 GiB of f32 is 15 * 2^30 elements: [15 * 2^20, 1024], then 1 MiB arrives
    craft a.tq 'S = t.frame("huge", "f32", [15 << 20, 1024], b"", stored_size=60 << 30,
                           raw_size=60 << 30, payload_crc=0) + b"\0" * (1 << 20)'
    local start=$SECONDS
    expect_bad a.tq 0 huge $((128 + (1 << 20))) 'truncated payload: 1048576 of 64424509440'
    [ $((SECONDS - start)) -lt 10 ]
    # under a 2 GB address-space limit: still 65, not an out-of-memory failure
    run bash -c 'ulimit -v 2000000; tq-cat </dev/null >/dev/null'
    if [ "$status" -ne 0 ]; then
        skip "tq-cat cannot start under ulimit -v (a sanitizer build reserves more)"
    fi
    run --separate-stderr bash -c 'ulimit -v 2000000; tq-cat <a.tq >/dev/null'
    [ "$status" -eq 65 ]
    [[ "$stderr" == "tq-cat: error: stdin: frame 0 \"huge\", byte $((128 + (1 << 20))): truncated payload"* ]]
    run --separate-stderr bash -c 'ulimit -v 2000000; cat a.tq | tq-cat --info >/dev/null'
    [ "$status" -eq 65 ]
}

# ------------------------------------------------------------ checksums and lengths

@test "header CRC mismatch" {
    craft a.tq 'S = f32(header_crc=0x12345678)'
    expect_bad a.tq 0 "" 44 'header CRC mismatch \(stored 12345678, computed [0-9a-f]{8}\)'
    # one bit of the name flipped, CRC left as it was
    craft b.tq 'b = bytearray(f32()); b[48 + 16] ^= 0x20; S = bytes(b)'
    [ "$(pyval 'f32()[64:67]')" = "b'emb'" ]
    expect_bad b.tq 0 "" 44 'header CRC mismatch'
    # a later frame: the name of the first must not leak into the message
    craft c.tq 'S = f32("first") + f32("second", header_crc=0)'
    expect_bad c.tq 1 "" "$(pyval 'len(f32("first")) + 44')" 'header CRC mismatch \(stored 00000000'
}

@test "payload CRC mismatch" {
    craft a.tq 'S = f32(payload_crc=0xdeadbeef)'
    expect_bad a.tq 0 emb 128 'payload CRC mismatch \(stored deadbeef, computed [0-9a-f]{8}\)'
    craft b.tq 'b = bytearray(f32()); b[128 + 23] ^= 1; S = bytes(b)'
    expect_bad b.tq 0 emb 128 'payload CRC mismatch'
    # large enough to be mapped from a file
    craft c.tq 'a = np.ones((512, 1024), "<f4"); b = bytearray(t.array_frame("big", a)); b[-7] ^= 4; S = f32() + bytes(b)'
    expect_bad c.tq 1 big "$(pyval 'len(f32()) + 128')" 'payload CRC mismatch'
}

@test "header_len that does not match the fields" {
    craft a.tq 'S = f32(header_len=192)'
    expect_bad a.tq 0 "" 16 'header length 192 does not match its fields \(128\)'
    craft b.tq 'S = f32(header_len=100)'
    expect_bad b.tq 0 "" 16 'header length 100'
    # a name_len one too long still fits the same 128 bytes: the name then
    # takes in a padding NUL
    craft c.tq 'S = f32(name_len=4)'
    expect_bad c.tq 0 "" 64 'frame name has a control, quote or backslash character'
}

@test "name or metadata length over its limit" {
    craft a.tq 'S = f32(name="n" * 256)'
    expect_bad a.tq 0 "" 10 'name length 256 is over the limit of 255'
    craft b.tq 'S = f32(meta=b"k=" + b"v" * 65535 + b"\0")'
    expect_bad b.tq 0 "" 12 'metadata length 65538 is over the limit of 65536'
}

@test "header padding that is not zero" {
    craft a.tq 'S = patch(f32(), 127, b"\x01")'
    expect_bad a.tq 0 emb 127 'header padding is not zero'
    craft b.tq 'S = patch(f32(), 48 + 16 + 3, b"\x20")'
    expect_bad b.tq 0 emb 67 'header padding is not zero'
}

@test "payload padding that is not zero" {
    craft a.tq 'S = f32(pad_byte=7)'
    expect_bad a.tq 0 emb $((128 + 24)) 'payload padding is not zero'
    craft b.tq 'S = patch(f32(), 128 + 63, b"\x01", crc=False)'
    expect_bad b.tq 0 emb $((128 + 63)) 'payload padding is not zero'
    # from a mapped file too: 2 MiB + 5 bytes of u8, one bad padding byte
    craft c.tq 'S = t.frame("big", "u8", [2**21 + 5], b"\1" * (2**21 + 5), pad_byte=1)'
    expect_bad c.tq 0 big $((64 + (1 << 21) + 5)) 'payload padding is not zero'
}

@test "reserved field and unknown flag bits" {
    craft a.tq 'S = f32(reserved=1)'
    expect_bad a.tq 0 emb 40 'reserved header field is not zero'
    craft b.tq 'S = f32(flags=2)'
    expect_bad b.tq 0 emb 9 'unknown flags 0x02'
    craft c.tq 'S = f32(flags=0x81)'
    expect_bad c.tq 0 emb 9 'unknown flags 0x81'
}

# ------------------------------------------------------------ shapes and sizes

@test "dims whose product overflows u64, dims over the frame limit" {
    craft a.tq 'S = t.frame("emb", "f32", [1 << 32, 1 << 32, 2], b"")'
    expect_bad a.tq 0 emb 48 'more than 2\^39 elements'
    # 2^37 bytes of f32
    craft b.tq 'S = t.frame("emb", "f32", [1 << 20, 1 << 15], b"", raw_size=1 << 37, stored_size=1 << 37)'
    expect_bad b.tq 0 emb 48 'shape needs 137438953472 bytes, over the frame limit of 68719476736'
    # a dim that is negative as i64
    craft c.tq 'S = t.frame("emb", "f32", [1 << 63, 1], b"")'
    expect_bad c.tq 0 emb 48 'dim 0 is too large'
    craft d.tq 'S = t.frame("emb", "f32", [2, (1 << 64) - 1], b"")'
    expect_bad d.tq 0 emb 56 'dim 1 is too large'
    # no rows, but rows so wide that a product of dims would overflow
    craft e.tq 'S = t.frame("emb", "f32", [0, 1 << 40, 1 << 40], b"")'
    expect_bad e.tq 0 emb 48 'more than 2\^39 elements'
}

@test "raw size that does not match the shape; stored size without zlib" {
    craft a.tq 'S = f32(raw_size=20)'
    expect_bad a.tq 0 emb 32 'raw size 20 does not match the shape \(24 bytes\)'
    craft b.tq 'S = f32(stored_size=32)'
    expect_bad b.tq 0 emb 24 'stored size 32 differs from raw size 24 in an uncompressed frame'
    craft c.tq 'S = t.frame("q", "q8_0", [2, 48], b"\0" * 102)'
    expect_bad c.tq 0 q 48 'q8_0 needs a last dim that is a multiple of 32'
    craft d.tq 'S = t.frame("q", "q4_0", [], b"\0" * 18)'
    expect_bad d.tq 0 q 48 'q4_0 needs a last dim that is a multiple of 32'
    craft e.tq 'S = t.frame("s", "bit", [], b"\0")'
    expect_bad e.tq 0 s 48 'bit needs rank 1 or more'
    craft f.tq 'S = t.frame("s", "bit", [2, 9], b"\0" * 3)'
    expect_bad f.tq 0 s 32 'raw size 3 does not match the shape \(4 bytes\)'
}

# ------------------------------------------------------------ zlib

@test "corrupt zlib payloads" {
    # the Adler-32 check of the stream is wrong
    craft a.tq 'z = zlib.compress(RAW); S = zframe(z[:-4] + bytes(4), 24)'
    expect_bad a.tq 0 emb 128 'zlib payload is corrupt \(incorrect data check\)'
    # not a zlib stream at all
    craft b.tq 'S = zframe(b"\x00\x01\x02\x03\x04\x05", 24)'
    expect_bad b.tq 0 emb 128 'zlib payload is corrupt \(incorrect header check\)'
    # cut short
    craft c.tq 'S = zframe(zlib.compress(RAW)[:-6], 24)'
    expect_bad c.tq 0 emb 128 'zlib payload is truncated'
    # bytes after the end of the zlib stream
    craft d.tq 'S = zframe(zlib.compress(RAW) + b"\0", 24)'
    expect_bad d.tq 0 emb 128 'zlib payload has 1 bytes after its end'
    # a preset dictionary is not allowed
    craft e.tq 'c = zlib.compressobj(zdict=b"abc"); S = zframe(c.compress(RAW) + c.flush(), 24)'
    expect_bad e.tq 0 emb 128 'zlib payload is corrupt'
    # empty stored bytes
    craft f.tq 'S = zframe(b"", 24)'
    expect_bad f.tq 0 emb 128 'zlib payload is truncated'
}

@test "zlib payload that inflates to fewer or more bytes than the raw size" {
    craft a.tq 'S = zframe(zlib.compress(RAW[:20]), 24)'
    expect_bad a.tq 0 emb 128 'zlib payload inflates to 20 bytes, the header says 24'
    craft b.tq 'S = zframe(zlib.compress(RAW + b"xxxx"), 24)'
    expect_bad b.tq 0 emb 128 'zlib payload inflates past its raw size of 24'
    craft c.tq 'S = zframe(zlib.compress(b""), 24)'
    expect_bad c.tq 0 emb 128 'inflates to 0 bytes'
    # a zlib bomb claiming less than it holds: 64 MiB of zeros in a 24-byte frame
    craft d.tq 'S = zframe(zlib.compress(bytes(64 << 20), 9), 24)'
    expect_bad d.tq 0 emb 128 'inflates past its raw size of 24'
}

# ------------------------------------------------------------ str

@test "str offsets: decreasing, out of range, not from 0, not ending at the end" {
    craft a.tq 'S = strs([0, 3, 2, 5], b"abcde")'
    expect_bad a.tq 0 txt 64 'str offset 2 is out of order or range'
    craft b.tq 'S = strs([0, 3, 99], b"abc")'
    expect_bad b.tq 0 txt 64 'str offset 2 is out of order or range'
    craft c.tq 'S = strs([1, 3], b"abc")'
    expect_bad c.tq 0 txt 64 'str offsets do not start at 0'
    craft d.tq 'S = strs([0, 2], b"abc")'
    expect_bad d.tq 0 txt 64 'str offsets end at 2, the payload holds 3 bytes'
    # fewer bytes than the offsets need: caught in the header, at raw_size
    craft e.tq 'S = t.frame("txt", "str", [5], bytes(16))'
    expect_bad e.tq 0 txt 32 'str payload of 16 bytes does not fit 5 rows'
    craft f.tq 'S = t.frame("txt", "str", [2, 1], bytes(24))'
    expect_bad f.tq 0 txt 8 'str frames have rank 1, not 2'
    # the same offsets compressed: found after inflating, same place
    craft g.tq 'S = strs([0, 3, 2, 5], b"abcde", compress=True)'
    expect_bad g.tq 0 txt 64 'str offset 2 is out of order or range'
}

@test "str payload that is not UTF-8" {
    local bad
    for bad in '\xc3\x28' '\xc0\xaf' '\xed\xa0\x80' '\xf4\x90\x80\x80' '\xe2\x82' '\xff' '\x80' \
        '\xf8\x88\x80\x80\x80' '\xe0\x80\xaf'; do
        craft a.tq "S = strs([0, 2, 2 + len(b'$bad')], b'ok$bad')"
        expect_bad a.tq 0 txt 64 'str payload is not valid UTF-8 at byte 26'
        craft b.tq "S = strs([0, 2, 2 + len(b'$bad')], b'ok$bad', compress=True)"
        expect_bad b.tq 0 txt 64 'str payload is not valid UTF-8 at byte 26'
    done
}

# ------------------------------------------------------------ names and metadata

@test "bad names: empty, control characters, quote, backslash" {
    local name
    craft a.tq 'S = f32(name="")'
    expect_bad a.tq 0 "" 64 'empty frame name'
    for name in 'e\x01b' 'e\nb' 'e\x7fb' 'e"b' 'e\\b' '\x1b[31m'; do
        craft b.tq "S = f32(name=b'$name')"
        expect_bad b.tq 0 "" 64 'frame name has a control, quote or backslash character'
    done
    # the name after three dims starts at 48 + 24
    craft c.tq 'S = t.frame(b"a\tb", "u8", [1, 1, 1], b"\1")'
    expect_bad c.tq 0 "" 72 'frame name has a control'
}

@test "bad metadata: no '=', empty key, not NUL-terminated, empty entry" {
    # metadata starts after the dims (48 + 16) and the name "emb" (3)
    craft a.tq 'S = f32(meta=b"abc\0")'
    expect_bad a.tq 0 emb 67 'metadata entry 0 is not key=value'
    craft b.tq 'S = f32(meta=b"a=1\0=v\0")'
    expect_bad b.tq 0 emb 67 'metadata entry 4 is not key=value'
    craft c.tq 'S = f32(meta=b"a=1")'
    expect_bad c.tq 0 emb 67 'metadata does not end with a NUL'
    craft d.tq 'S = f32(meta=b"a=1\0\0")'
    expect_bad d.tq 0 emb 67 'metadata entry 4 is not key=value'
}

# ------------------------------------------------------------ batches

@test "later batches of a name must agree in dtype, rank and trailing dims" {
    craft a.tq 'S = f32() + t.frame("emb", "f64", [2, 3], bytes(48))'
    expect_bad a.tq 1 emb "$(pyval 'len(f32())')" 'dtype f64 differs from the earlier batches \(f32\)'
    craft b.tq 'S = f32() + f32("other", cols=5) + f32(cols=4)'
    expect_bad b.tq 2 emb "$(pyval 'len(f32()) + len(f32("other", cols=5))')" \
        'dim 1 is 4, the earlier batches have 3'
    craft c.tq 'S = f32() + t.frame("emb", "f32", [2, 3, 1], bytes(24))'
    expect_bad c.tq 1 emb "$(pyval 'len(f32())')" 'rank 3 differs from the earlier batches \(2\)'
    # more rows is fine, so is another name with another shape; then a bad one
    craft d.tq 'S = f32() + f32(rows=7) + f32("x", cols=9) + f32(rows=0) + f32("x", cols=8)'
    expect_bad d.tq 4 x "$(pyval 'sum(map(len, [f32(), f32(rows=7), f32("x", cols=9), f32(rows=0)]))')" \
        'dim 1 is 8, the earlier batches have 9'
}

@test "concatenated inputs: the message names the bad input and its own offset" {
    craft good.tq 'S = f32() + f32("x")'
    craft bad.tq 'S = f32(rows=4) + f32(payload_crc=1)'
    local off1
    off1=$(pyval 'len(f32(rows=4))')
    for cmd in 'tq-cat good.tq bad.tq' 'tq-cat --info good.tq bad.tq' 'tq-cat good.tq - <bad.tq'; do
        run --separate-stderr bash -c "$cmd >/dev/null"
        local label=bad.tq
        [[ "$cmd" == *'<'* ]] && label=stdin
        [ "$status" -eq 65 ]
        [ "${#stderr_lines[@]}" -eq 1 ]
        [ "$stderr" = "tq-cat: error: $label: frame 3 \"emb\", byte $((off1 + 128)): payload CRC mismatch (stored 00000001, computed $(pyval '"%08x" % t.crc32c(RAW)'))" ]
    done
    # batches are checked across inputs: bad2.tq's emb has 4 columns
    craft bad2.tq 'S = f32(cols=4)'
    run --separate-stderr tq-cat good.tq bad2.tq
    [ "$status" -eq 65 ]
    [ "$stderr" = 'tq-cat: error: bad2.tq: frame 2 "emb", byte 0: dim 1 is 4, the earlier batches have 3' ]
    # a truncated first input is an error even when more inputs follow
    craft cut.tq 'S = f32()[:-1]'
    run --separate-stderr tq-cat cut.tq good.tq
    [ "$status" -eq 65 ]
    [ "$stderr" = "tq-cat: error: cut.tq: frame 0 \"emb\", byte $(pyval 'len(f32()) - 1'): truncated payload: 63 of 64 bytes (with padding to 64)" ]
    # the same streams through cat: one input, offsets count from its start
    run --separate-stderr bash -c 'cat good.tq bad.tq | tq-cat >/dev/null'
    [ "$status" -eq 65 ]
    [[ "$stderr" == "tq-cat: error: stdin: frame 3 \"emb\", byte $(($(stat -c %s good.tq) + off1 + 128)): payload CRC"* ]]
}

# ------------------------------------------------------------ what must pass

# Frames of every dtype (13 codes), some with metadata, some compressed.
ALL_DTYPES='
rng = np.random.default_rng(7)
fr = []
for comp in (False, True):
    fr.append(t.array_frame("f32", rng.standard_normal((3, 5)).astype("<f4"), meta={"model": "x", "dim": 5}, compress=comp))
    fr.append(t.array_frame("f64", rng.standard_normal((2, 2, 2)), compress=comp))
    fr.append(t.array_frame("f16", rng.standard_normal(7).astype("<f2"), compress=comp))
    fr.append(t.frame("bf16", "bf16", [4, 3], rng.integers(0, 1 << 16, 12).astype("<u2").tobytes(), compress=comp))
    for dt in ("i8", "u8", "i16", "i32", "i64"):
        fr.append(t.array_frame(dt, rng.integers(-100, 100, (5, 2)).astype(t.NUMPY[dt]), compress=comp))
    fr.append(t.frame("str", "str", [4], t.str_payload(["a", "", "héllo wörld", "\u4e2d\u6587 \U0001f600"]), meta={"k": "v=w"}, compress=comp))
    fr.append(t.frame("q8_0", "q8_0", [2, 64], rng.integers(0, 256, 2 * 2 * 34).astype("u1").tobytes(), compress=comp))
    fr.append(t.frame("q4_0", "q4_0", [3, 32], rng.integers(0, 256, 3 * 18).astype("u1").tobytes(), compress=comp))
    fr.append(t.frame("bit", "bit", [3, 10], rng.integers(0, 256, 3 * 2).astype("u1").tobytes(), compress=comp))
    fr.append(t.frame("scalar", "f64", [], struct.pack("<d", 2.5), compress=comp))
S = b"".join(fr)
'

@test "every dtype passes through byte for byte, compressed or not" {
    craft all.tq "$ALL_DTYPES"
    run "$PY" -c "$PRELUDE
fr = t.read(open('all.tq', 'rb').read())
print(len(fr), len({f['dtype'] for f in fr}), sum(f['flags'] for f in fr))"
    [ "$output" = "28 13 14" ]
    tq-cat <all.tq >out1.tq
    cmp all.tq out1.tq
    tq-cat all.tq >out2.tq
    cmp all.tq out2.tq
    cat all.tq | tq-cat | tq-cat - >out3.tq
    cmp all.tq out3.tq
    # twice in a row: batches of the same names agree
    tq-cat all.tq all.tq >twice.tq
    cat all.tq all.tq | cmp - twice.tq
}

@test "--info lists what tqstream.py wrote" {
    craft all.tq "$ALL_DTYPES"
    tq-cat --info all.tq >info.txt
    "$PY" -c "$PRELUDE
fr = t.read(open('all.tq', 'rb').read())
lines = open('info.txt').read().splitlines()
assert lines[0].split() == ['frame', 'name', 'dtype', 'shape', 'stored', 'raw', 'codec'], lines[0]
assert len(lines) == len(fr) + 1
off = 0
data = open('all.tq', 'rb').read()
for i, (f, line) in enumerate(zip(fr, lines[1:])):
    stored = struct.unpack_from('<Q', data, off + 24)[0]
    off += struct.unpack_from('<I', data, off + 16)[0] + t.align(stored)
    shape = 'x'.join(map(str, f['dims'])) or 'scalar'
    want = [str(i), f['name'], f['dtype'], shape, str(stored), str(len(f['raw'])), 'zlib' if f['flags'] else '-']
    assert line.split() == want, (line, want)
"
}

@test "compressed frames are checked and can be inflated or deflated again" {
    craft all.tq "$ALL_DTYPES"
    tq-cat -Z all.tq >raw.tq
    tq-cat -z9 raw.tq >z.tq
    "$PY" -c "$PRELUDE
a = t.read(open('all.tq', 'rb').read())
r = t.read(open('raw.tq', 'rb').read())
z = t.read(open('z.tq', 'rb').read())
assert [f['flags'] for f in r] == [0] * len(a)
assert all(f['flags'] == 1 for f in z if f['raw'])
for x, y, w in zip(a, r, z):
    assert x['raw'] == y['raw'] == w['raw'] and x['dims'] == y['dims'] == w['dims']
    assert x['meta'] == y['meta'] == w['meta'] and x['dtype'] == y['dtype'] == w['dtype']
"
}

@test "an empty stream: nothing out, exit 0" {
    run --separate-stderr tq-cat </dev/null
    [ "$status" -eq 0 ]
    [ -z "$output" ] && [ -z "$stderr" ]
    : >empty.tq
    run --separate-stderr tq-cat empty.tq empty.tq
    [ "$status" -eq 0 ]
    [ -z "$output" ] && [ -z "$stderr" ]
    run --separate-stderr tq-cat --info empty.tq
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "${lines[0]}" == *frame*name*dtype* ]]
}

@test "frames with no rows, and a rank-0 frame" {
    craft z.tq 'S = (f32(rows=0) + t.frame("txt", "str", [0], struct.pack("<Q", 0)) +
                   t.frame("q", "q8_0", [0, 64], b"") + t.frame("b", "bit", [0, 5], b"") +
                   t.frame("e", "u8", [3, 0, 4], b"") + t.frame("s", "i32", [], b"\7\0\0\0") +
                   f32(rows=0, compress=True))'
    tq-cat z.tq >out.tq
    cmp z.tq out.tq
    tq-cat --info z.tq >info.txt
    [ "$(awk 'NR > 1 { print $4 }' info.txt | tr '\n' ' ')" = "0x3 0 0x64 0x5 3x0x4 scalar 0x3 " ]
}

@test "frames arrive whole whether the pipe brings 1 byte at a time or all at once" {
    craft all.tq "$ALL_DTYPES
S += f32(rows=300, cols=100)"
    "$PY" -c '
import os, time
data = open("all.tq", "rb").read()
for i in range(len(data)):
    os.write(1, data[i:i + 1])
    if i % 4096 == 0:
        time.sleep(0.001)
' | tq-cat >slow.tq
    cmp all.tq slow.tq
    dd if=all.tq bs=1 status=none | tq-cat --info >info1.txt
    tq-cat --info <all.tq >info2.txt
    cmp info1.txt info2.txt
    [ "$(wc -l <info1.txt)" -eq 30 ]
}

@test "a 300 MB stream passes through in bounded memory" {
    command -v /usr/bin/time >/dev/null || skip "GNU time is not installed"
    # 38 frames of 8 MiB (f32 2048x1024), then 1000 small ones
    craft one.tq 'S = t.array_frame("emb", np.full((2048, 1024), 0.25, "<f4"))'
    craft small.tq 'S = b"".join(f32("s", rows=1) for _ in range(1000))'
    for i in $(seq 38); do cat one.tq; done >big.tq
    cat small.tq >>big.tq
    [ "$(stat -c %s big.tq)" -gt 300000000 ]
    cat big.tq | /usr/bin/time -f %M -o rss1 tq-cat >out.tq
    cmp big.tq out.tq
    rm out.tq
    /usr/bin/time -f %M -o rss2 tq-cat big.tq >/dev/null
    cat big.tq | /usr/bin/time -f %M -o rss3 tq-cat --info >/dev/null
    # a frame is 8 MiB: what tq-cat holds stays under 40 MB (sanitizers: 200)
    local limit=40000
    [[ "$TQ_BIN" == *san* ]] && limit=200000
    echo "max RSS (KB): pipe $(tail -1 rss1), file $(tail -1 rss2), info $(tail -1 rss3)" >&3
    [ "$(tail -1 rss1)" -lt $limit ]
    [ "$(tail -1 rss2)" -lt $limit ]
    [ "$(tail -1 rss3)" -lt $limit ]
}

@test "a .npy or text file where a stream is expected: a hint naming the tq-cat --from, with every tool" {
    printf '\x93NUMPY\x01\x00v\x00{"descr": "<f4", "fortran_order": False, "shape": (1,), }' >x.npy
    printf 'a,b\n1,2\n' >x.csv
    printf 'a\tb\n1\t2\n' >x.tsv
    printf '{"emb": [1, 2]}\n' >x.jsonl
    printf 'hello world\n' >x.txt
    npy="this is a NumPy .npy file; convert it with 'tq-cat --from npy'"
    csv="this looks like text (CSV); convert it with 'tq-cat --from csv'"
    tsv="this looks like text (TSV); convert it with 'tq-cat --from tsv'"
    jsonl="this looks like JSON text; convert JSON lines with 'tq-cat --from jsonl'"
    txt="this looks like text; convert numbers with 'tq-cat --from tsv', embed words with 'tq-embed'"
    for cmd in 'tq-cat <F' 'tq-cat F' 'tq-simmat <F' 'tq-simmat --db F <F' 'tq-simmat --merge F' \
        'tq-attend --self <F' 'tq-score --consensus <F' 'tq-score --consensus F' \
        'tq-quantize --to int8 <F' 'tq-quantize --to int8 F' 'tq-train <F' 'tq-train F'; do
        for kind in npy csv tsv jsonl txt; do
            f=x.$kind
            case "$cmd" in *' F'*) label=$f ;; *) label=stdin ;; esac
            run --separate-stderr bash -c "${cmd//F/$f}"
            want="${cmd%% *}: error: $label: frame 0, byte 0: bad magic: not a TQ stream: ${!kind}"
            [ "$status" -eq 65 ] || fail "$cmd ($f): status $status: $stderr"
            [ -z "$output" ] || fail "$cmd ($f): wrote to stdout"
            [ "$stderr" = "$want" ] || fail "$cmd ($f): stderr: $stderr"
        done
    done
}
