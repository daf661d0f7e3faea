#!/usr/bin/env bash
# bench-embed.sh BINDIR [MB]: throughput of tq-embed's hash embedder (hash:384, all
# cores) in MB/s of text over a generated corpus of about MB megabytes (default
# 100) of English-like lines. Not a test: the target (>= 50 MB/s on 2 cores) is
# reported, never enforced, as shared machines are noisy.
set -euo pipefail
BIN=${1:?usage: bench-embed.sh BINDIR [MB]}
MB=${2:-100}
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-bench-embed.XXXXXX")
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 - "$work/corpus.txt" "$MB" <<'PY'
import random, sys
rng = random.Random(7)
letters = "etaoinshrdlcumwfgypbvkjxqz"
vocab = ["".join(rng.choice(letters[:rng.randint(8, 26)]) for _ in range(rng.randint(2, 10)))
         for _ in range(20000)]
weights = [1.0 / (i + 1) for i in range(len(vocab))]
target = int(sys.argv[2]) * 1000000
with open(sys.argv[1], "w") as f:
    size = 0
    while size < target:
        words = rng.choices(vocab, weights, k=4000)
        lines, i = [], 0
        while i < len(words):
            n = rng.randint(5, 40)
            s = " ".join(words[i:i + n]).capitalize() + rng.choice(".!?,;")
            lines.append(s)
            i += n
        block = "\n".join(lines) + "\n"
        f.write(block)
        size += len(block)
PY
bytes=$(stat -c %s "$work/corpus.txt")
# best of 3 by wall clock; CPU seconds (user + sys) shown too, since a loaded
# machine stretches the wall clock but not the work
best="" cpu=""
for _ in 1 2 3; do
    /usr/bin/time -f "%e %U %S" -o "$work/t" "$BIN/tq-embed" -m hash:384 "$work/corpus.txt" > /dev/null
    read -r wall user sys < "$work/t"
    if [ -z "$best" ] || [ "$(echo "$wall < $best" | bc -l)" = 1 ]; then
        best=$wall cpu=$(echo "$user + $sys" | bc -l)
    fi
done
mb=$(echo "scale=1; $bytes / 1000000" | bc -l)
echo "tq-embed hash:384: $mb MB of text in $best s: $(echo "scale=1; $mb / $best" | bc -l) MB/s" \
    "on $(nproc) cores (target >= 50); $cpu CPU s: $(echo "scale=1; $mb / $cpu" | bc -l) MB/s per core"
