#!/usr/bin/env bash
# gpu-fault-sweep.sh [-i IN] [-t] OUT CMD...: makes each driver call of one tool's GPU run
# fail in turn, through the stand-in driver (tests/standin/README.md, "Faults"),
# and holds the tool to what a user is owed when a GPU fails under it.
#
# CMD runs in the current folder and writes its result to the file OUT (its
# -o), reading IN on its standard input (default /dev/null). A clean run first counts the calls of each kind (launch, alloc, copy,
# sync, event, module, blas, graph, context); then, for each kind, call N
# fails, for every N up to the count or, past TQ_FAULT_SAMPLES (default 4)
# calls, for the first, the last and ones spread between; and a few launches
# fault with an illegal address (700), the sticky error that leaves the
# context unusable. Each faulted run must either
#   - recover: exit 0, no message, the clean run's bytes in OUT (with -t,
#     for a result with timings in it, an OUT of the clean run's size); or
#   - fail cleanly: exit 1 (CONVENTIONS), one line on stderr that names the
#     device, the driver call and the driver's error, no OUT and no other new
#     file left in the folder;
# and must end within TQ_FAULT_TIMEOUT seconds (default 60): a hang fails.
# A crash, a sanitizer report (more lines), a second message or a changed
# result is a failure. Prints one line per bad case and a summary; exits 1 if
# any case was bad, 2 on a misuse or a clean run that fails.
set -u
in=/dev/null
timed=0
if [ "${1:-}" = -i ]; then in=$2; shift 2; fi
if [ "${1:-}" = -t ]; then timed=1; shift; fi
out=${1:?usage: gpu-fault-sweep.sh [-i IN] OUT CMD...}
shift
[ $# -gt 0 ] || { echo "gpu-fault-sweep: no command" >&2; exit 2; }
samples=${TQ_FAULT_SAMPLES:-4}
limit=${TQ_FAULT_TIMEOUT:-60}
tool=$(basename "$1")
work=$(mktemp -d "${TMPDIR:-/tmp}/tq-faults.XXXXXX")
trap 'rm -rf "$work"' EXIT
export TQ_STANDIN_QUIET=1
unset TQ_STANDIN_FAIL TQ_STANDIN_COUNTS

listing() { ls -A | grep -vxF "$(basename "$out")" | sort; }

rm -f "$out"
TQ_STANDIN_COUNTS="$work/counts" timeout "$limit" "$@" < "$in" 2> "$work/err"
rc=$?
if [ $rc -ne 0 ] || [ ! -f "$out" ]; then
    echo "gpu-fault-sweep: $tool: the clean run exited $rc: $(head -c 400 "$work/err")" >&2
    exit 2
fi
mv "$out" "$work/ref"
listing > "$work/before"

# which Ns of a kind called c times
picks() {
    local c=$1 i
    if [ "$c" -le "$samples" ]; then
        seq 1 "$c"
    else
        echo 1
        for i in $(seq 1 $((samples - 2))); do echo $((1 + i * (c - 1) / (samples - 1))); done
        echo "$c"
    fi | sort -un
}

cases=()
while read -r kind count; do
    [ "$count" -gt 0 ] 2>/dev/null || continue
    for n in $(picks "$count"); do cases+=("$kind:$n"); done
    if [ "$kind" = launch ]; then # the kernel faults on the device: sticky
        for n in $(samples=3 picks "$count"); do cases+=("launch:$n:700"); done
    fi
done < "$work/counts"

# the one line: "TOOL: error: ...cuda:0: CALL: ERROR..."
line_re="^$tool: error: (.*: )?(cuda|hip)(:[0-9]+)?: (cu|hip|cublas|rocblas_)[A-Za-z_0-9]*: (CUDA_ERROR_|hipError|CUBLAS_STATUS_|rocblas_status_)[A-Za-z_]+"
bad=0 recovered=0 failed=0
for c in "${cases[@]}"; do
    rm -f "$out"
    TQ_STANDIN_FAIL=$c timeout "$limit" "$@" < "$in" > "$work/stdout" 2> "$work/err"
    rc=$?
    lines=$(wc -l < "$work/err")
    why=""
    if [ $rc -eq 0 ]; then
        if [ -s "$work/err" ]; then
            why="exit 0 with a message"
        elif [ $timed = 0 ] && ! cmp -s "$out" "$work/ref"; then
            why="exit 0 with another result"
        elif [ $timed = 1 ] && [ "$(wc -l < "$out")" != "$(wc -l < "$work/ref")" ]; then
            why="exit 0 with another result"
        else
            recovered=$((recovered + 1))
        fi
    elif [ $rc -eq 1 ]; then
        if [ "$lines" -ne 1 ] || ! grep -Eq "$line_re" "$work/err"; then
            why="exit 1 without one line naming the device, the call and the driver's error"
        elif [ -e "$out" ]; then
            why="exit 1 leaving $out behind"
        elif ! listing | cmp -s - "$work/before"; then
            why="exit 1 leaving files behind: $(listing | comm -13 "$work/before" - | tr '\n' ' ')"
        else
            failed=$((failed + 1))
        fi
    elif [ $rc -eq 124 ]; then
        why="no end within ${limit} s"
    else
        why="exit $rc"
    fi
    if [ -n "$why" ]; then
        bad=$((bad + 1))
        echo "gpu-fault-sweep: $tool, TQ_STANDIN_FAIL=$c: $why; stderr: $(head -c 600 "$work/err" | tr '\n' '|')"
    fi
    rm -f "$out"
    listing | comm -13 "$work/before" - | while read -r f; do rm -rf "./$f"; done
done
echo "gpu-fault-sweep: $tool: ${#cases[@]} faults ($(tr '\n' ' ' < "$work/counts" | sed 's/ $//')): $recovered recovered, $failed failed cleanly, $bad bad"
[ $bad -eq 0 ]
