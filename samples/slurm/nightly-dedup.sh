#!/bin/bash
# nightly-dedup.sh GROWING.txt STATE_DIR: for cron. GROWING.txt is a text file
# that only grows (one record a line, appended to all day); each run takes the
# complete lines added since the last run, drops those whose cosine similarity
# with a line kept before (on any earlier run, or earlier in this run) is
# TQ_DEDUP (default 0.9) or more, and adds the rest to the kept set:
#
#   STATE_DIR/current/kept.txt   the kept lines, in order
#   STATE_DIR/current/kept.tq    their vectors (tq-simmat --dedup's --db)
#   STATE_DIR/current/offset     the bytes of GROWING.txt already taken
#
# A line still being written (no newline yet) waits for the next run. A run
# builds the next state in a new folder and switches the "current" link to it
# with one rename, so a crash or a kill leaves the previous state whole, and a
# reader of current/ never sees half of one. One run at a time: a lock (flock)
# on STATE_DIR/lock; a second run exits at once with 75.
#
#   15 2 * * *  /opt/tq/samples/slurm/nightly-dedup.sh /data/feed.txt /data/feed.dedup
#
# Quiet when all is well; one line on stderr on a problem. Exit status: 0 done
# (also when nothing was new), 2 usage, 65 GROWING.txt shrank (it is not
# append-only: start a new STATE_DIR), 66 GROWING.txt missing, 73 STATE_DIR
# cannot be written, 75 another run holds the lock, or that of the tool that
# failed. Environment: TQ_BIN (the tools' folder), TQ_MODEL (default hash:384;
# keep it the same from run to run), TQ_DEDUP.
set -euo pipefail
[ -n "${TQ_BIN:-}" ] && PATH="$TQ_BIN:$PATH"
me=nightly-dedup
[ $# -eq 2 ] || { echo "usage: $me GROWING.txt STATE_DIR" >&2; exit 2; }
in=$1 state=$2
model=${TQ_MODEL:-hash:384}
t=${TQ_DEDUP:-0.9}
[ -r "$in" ] || { echo "$me: $in: cannot read it" >&2; exit 66; }
mkdir -p "$state" 2>/dev/null && [ -w "$state" ] ||
    { echo "$me: $state: cannot write there" >&2; exit 73; }

exec 9>"$state/lock"
flock -n 9 || { echo "$me: another run holds $state/lock" >&2; exit 75; }

cur=$state/current
off=0
[ -e "$cur/offset" ] && off=$(cat "$cur/offset")
size=$(stat -c %s "$in")
if [ "$size" -lt "$off" ]; then
    echo "$me: $in has $size bytes, fewer than the $off already taken" >&2
    exit 65
fi

# a generation left by a run that was killed is not current: it goes
for g in "$state"/gen.*; do
    [ -e "$g" ] && [ "$(basename "$g")" != "$(readlink "$cur" 2>/dev/null)" ] && rm -rf "$g"
done
next=$(mktemp -d "$state/gen.XXXXXX")
trap 'rm -rf "$next"' EXIT
chmod 755 "$next"
# the new bytes, less a last line with no newline yet
tail -c +"$((off + 1))" "$in" | head -c "$((size - off))" > "$next/new.raw"
got=$(stat -c %s "$next/new.raw")
if [ "$got" -gt 0 ] && [ "$(tail -c 1 "$next/new.raw" | od -An -c | tr -d ' ')" != '\n' ]; then
    part=$(tail -n 1 "$next/new.raw" | wc -c)
    head -c "$((got - part))" "$next/new.raw" > "$next/new.txt"
    got=$((got - part))
else
    mv "$next/new.raw" "$next/new.txt"
fi
rm -f "$next/new.raw"
[ "$got" -gt 0 ] || exit 0 # nothing complete is new

# keys of tq-embed are the line numbers in new.txt (from 0)
db=()
[ -s "$cur/kept.tq" ] && db=(--db "$cur/kept.tq")
tq-embed -m "$model" "$next/new.txt" | tq-simmat --dedup "$t" "${db[@]}" > "$next/new.tq"
tq-cat -t tsv --name key "$next/new.tq" > "$next/keys.tsv"
{ [ -e "$cur/kept.txt" ] && cat "$cur/kept.txt"
  awk 'FILENAME == ARGV[1] { if (FNR > 1) keep[$1] = 1; next } (FNR - 1) in keep' \
      "$next/keys.tsv" "$next/new.txt"; } > "$next/kept.txt"
{ [ -e "$cur/kept.tq" ] && cat "$cur/kept.tq"; cat "$next/new.tq"; } > "$next/kept.tq"
echo "$((off + got))" > "$next/offset"
rm -f "$next/new.txt" "$next/new.tq" "$next/keys.tsv"

# switch: one rename of the link, then the old generation goes
old=$(readlink "$cur" 2>/dev/null || true)
ln -sfn "$(basename "$next")" "$state/current.new"
mv -T "$state/current.new" "$cur"
trap - EXIT
[ -n "$old" ] && rm -rf "${state:?}/$old"
exit 0
