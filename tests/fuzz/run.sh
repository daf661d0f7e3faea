#!/bin/sh
# run.sh SECONDS: builds the stream reader's fuzz target with clang (libFuzzer,
# AddressSanitizer, UndefinedBehaviorSanitizer) straight from the lib sources
# into build/fuzz/, then fuzzes it for SECONDS seconds (default 20) from a seed
# corpus made by make_corpus.py. Exits non-zero if it finds a crash; the input
# that crashed is left in build/fuzz/artifacts/.
set -eu
secs=${1:-20}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/build/fuzz"
cc=${FUZZ_CC:-clang}
py=/usr/bin/python3
[ -x "$py" ] || py=python3

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "tests/fuzz/run.sh: $cc not found (apt-get install clang libclang-rt-dev)" >&2
    exit 1
fi
mkdir -p "$out/corpus" "$out/artifacts"
cd "$root"
"$cc" -std=c11 -g -O1 -D_GNU_SOURCE -Ilib \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -fno-omit-frame-pointer \
    tests/fuzz/fuzz_reader.c lib/stream/reader.c lib/stream/writer.c lib/stream/frame.c lib/stream/dtype.c \
    lib/stream/crc32c.c lib/stream/thread.c lib/stream/error.c lib/stream/atomic.c -lz -lm -pthread -o "$out/fuzz_reader"
rm -rf "$out/seeds"
"$py" tests/fuzz/make_corpus.py "$out/seeds"

echo "fuzz: $secs s of fuzz_reader (corpus build/fuzz/corpus)"
if "$out/fuzz_reader" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 \
    -timeout=20 -dict="$out/tq.dict" -artifact_prefix="$out/artifacts/" \
    -print_final_stats=1 "$out/corpus" "$out/seeds" >"$out/log" 2>&1; then
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$out/log" |
        sed 's/^stat::/fuzz: /'
    echo "fuzz: no crash"
else
    tail -n 60 "$out/log" >&2
    echo "fuzz: crash, input in build/fuzz/artifacts/ (log: build/fuzz/log)" >&2
    exit 1
fi
