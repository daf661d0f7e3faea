#!/bin/bash
# bench.sh DRIVER [LINES]: times `fasttext print-sentence-vectors` and our
# embedder (through the ft-embed driver, 1 and 2 threads) on the same models
# and lines; the models are trained here on a generated corpus.
set -euo pipefail
driver=$1; n=${2:-50000}
ft=${FASTTEXT:-/usr/bin/fasttext}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$work" "$n" <<'PY'
import random, sys
rng = random.Random(1)
syl = ["ka", "to", "ri", "mu", "sen", "ló", "über", "na", "qi", "zé", "po", "la", "ven", "dor"]
vocab = ["".join(rng.choice(syl) for _ in range(rng.randint(1, 4))) for _ in range(20000)]
def line():
    return " ".join(vocab[min(int(rng.expovariate(1 / 2000)), 19999)] for _ in range(rng.randint(5, 20)))
with open(sys.argv[1] + "/train.txt", "w") as f:
    for _ in range(20000):
        f.write("__label__%d %s\n" % (rng.randint(0, 9), line()))
with open(sys.argv[1] + "/lines.txt", "w") as f:
    for _ in range(int(sys.argv[2])):
        f.write(line() + "\n")
PY
"$ft" supervised -input "$work/train.txt" -output "$work/sup" -dim 100 -epoch 1 -minn 3 -maxn 6 \
    -wordNgrams 2 -bucket 200000 -thread 2 -verbose 0
"$ft" skipgram -input "$work/train.txt" -output "$work/sg" -dim 100 -epoch 1 -bucket 200000 \
    -thread 2 -verbose 0
"$ft" quantize -input "$work/train.txt" -output "$work/sup" -qnorm -dsub 2 -thread 2 -verbose 0
secs() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
printf '%-8s %-34s %8s %10s\n' model run seconds lines/s
for m in sup.bin sg.bin sup.ftz; do
    for run in "fasttext print-sentence-vectors" "ours, 1 thread, printing" "ours, 2 threads, printing" \
               "ours, 1 thread, no printing" "ours, 2 threads, no printing"; do
        case $run in
        fasttext*) s=$(secs bash -c "'$ft' print-sentence-vectors '$work/$m' < '$work/lines.txt'") ;;
        *"1 thread, printing") s=$(secs bash -c "'$driver' '$work/$m' 1 < '$work/lines.txt'") ;;
        *"2 threads, printing") s=$(secs bash -c "'$driver' '$work/$m' 2 < '$work/lines.txt'") ;;
        *"1 thread, no printing") s=$(secs bash -c "FT_EMBED_QUIET=1 '$driver' '$work/$m' 1 < '$work/lines.txt'") ;;
        *) s=$(secs bash -c "FT_EMBED_QUIET=1 '$driver' '$work/$m' 2 < '$work/lines.txt'") ;;
        esac
        printf '%-8s %-34s %8.3f %10.0f\n' "$m" "$run" "$s" "$(echo "$n / $s" | bc -l)"
    done
done
