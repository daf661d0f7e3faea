#!/usr/bin/env bash
# fault-sweep.sh gpu|host [-i IN] [-t] [-w] OUT CMD...: makes each call of a kind
# in one tool's run fail in turn and holds the tool to what a user is owed
# when the machine fails under it, sqlite's malloc-failure tests' way.
#   gpu:  the driver's calls, through the stand-in driver (tests/standin/
#         README.md, "Faults"): launch, alloc, copy, sync, event, module,
#         blas, graph, context; and a few launches fault with an illegal
#         address (700), the sticky error that leaves the context unusable.
#   host: the host's calls, through the shim TQ_FAULT_SHIM names, preloaded
#         (tests/faults/README.md): alloc and mmap (out of memory), open of a
#         file for writing and write (a full disk, ENOSPC; a few with EIO),
#         read (EIO).
#
# CMD runs in the current folder and writes its result to the file OUT (its
# -o), reading IN on its standard input (default /dev/null). A clean run
# first counts the calls of each kind; then, for each kind, call N fails, for
# every N up to the count or, past TQ_FAULT_SAMPLES (default 4) calls, for
# the first, the last and ones spread between (with TQ_FAULT_SEED set, drawn
# at random within their stretch, so that runs with other seeds reach other
# calls). Each faulted run must either
#   - recover: exit 0, no message, the clean run's bytes in OUT (with -t,
#     for a result with timings in it, an OUT of the clean run's lines); or
#   - with -w, for a tool that warns of a part it could not do and goes on
#     (tq-bench's failed measurement: its man page, EXIT STATUS): exit 1,
#     "TOOL: warning: ..." lines giving the reason below, then one
#     "TOOL: error: ..." line; OUT may be written; or
#   - fail cleanly: one line on stderr, "TOOL: error: ...", no OUT and no
#     other new file left in the folder, and
#       gpu: exit 1, the line naming the device, the driver call and the
#            driver's error;
#       host: out of memory (alloc, mmap): exit 1, "out of memory" in the
#            line; an output that cannot be created (open): exit 73 or 74;
#            an I/O error (write, read): exit 74; the line giving the
#            system's reason for an I/O error ("No space left on device");
# and must end within TQ_FAULT_TIMEOUT seconds (default 60): a hang fails.
# A crash, a sanitizer report (more lines), a second message or a changed
# result is a failure. Prints one line per bad case and a summary; exits 1 if
# any case was bad, 2 on a misuse or a clean run that fails.
set -u
me=fault-sweep
mode=${1:-}
shift
in=/dev/null
timed=0
warned=0
if [ "${1:-}" = -i ]; then in=$2; shift 2; fi
if [ "${1:-}" = -t ]; then timed=1; shift; fi
if [ "${1:-}" = -w ]; then warned=1; shift; fi
out=${1:?usage: fault-sweep.sh gpu|host [-i IN] [-t] [-w] OUT CMD...}
shift
[ $# -gt 0 ] || { echo "$me: no command" >&2; exit 2; }
samples=${TQ_FAULT_SAMPLES:-4}
limit=${TQ_FAULT_TIMEOUT:-60}
tool=$(basename "$1")

# each mode: the variables that fail a call and count them, and what runs
# the command with them (timeout's own process is no part of it: the shim
# goes to the tool only)
case $mode in
gpu)
    fail_var=TQ_STANDIN_FAIL counts_var=TQ_STANDIN_COUNTS
    export TQ_STANDIN_QUIET=1
    unset TQ_STANDIN_FAIL TQ_STANDIN_COUNTS
    pre=(env)
    ;;
host)
    fail_var=TQ_FAULT_FAIL counts_var=TQ_FAULT_COUNTS
    [ -f "${TQ_FAULT_SHIM:-}" ] || { echo "$me: TQ_FAULT_SHIM names no shim (make faults builds it)" >&2; exit 2; }
    export TQ_FAULT_QUIET=1
    unset TQ_FAULT_FAIL TQ_FAULT_COUNTS
    # under AddressSanitizer the shim comes before its runtime, on purpose
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
    pre=(env "LD_PRELOAD=$TQ_FAULT_SHIM${LD_PRELOAD:+:$LD_PRELOAD}")
    ;;
*)
    echo "usage: fault-sweep.sh gpu|host [-i IN] [-t] [-w] OUT CMD..." >&2
    exit 2
    ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/tq-faults.XXXXXX")
trap 'rm -rf "$work"' EXIT

listing() { ls -A | grep -vxF "$(basename "$out")" | sort; }

# run VAR=VALUE: the command with one setting, in the time limit
run() { timeout "$limit" "${pre[@]}" "$1" "${@:2}" < "$in" > "$work/stdout" 2> "$work/err"; }

rm -f "$out"
run "$counts_var=$work/counts" "$@"
rc=$?
if [ $rc -ne 0 ] || [ ! -f "$out" ]; then
    echo "$me: $tool: the clean run exited $rc: $(head -c 400 "$work/err")" >&2
    exit 2
fi
mv "$out" "$work/ref"
listing > "$work/before"

# which Ns of a kind called c times
[ -n "${TQ_FAULT_SEED:-}" ] && RANDOM=$TQ_FAULT_SEED
picks() {
    local c=$1 i lo hi
    if [ "$c" -le "$samples" ]; then
        seq 1 "$c"
    else
        echo 1
        for i in $(seq 1 $((samples - 2))); do
            if [ -n "${TQ_FAULT_SEED:-}" ]; then # anywhere in stretch i
                lo=$((2 + (i - 1) * (c - 2) / (samples - 2)))
                hi=$((1 + i * (c - 2) / (samples - 2)))
                echo $((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
            else
                echo $((1 + i * (c - 1) / (samples - 1)))
            fi
        done
        echo "$c"
    fi | sort -un
}

cases=()
while read -r kind count; do
    [ "$count" -gt 0 ] 2>/dev/null || continue
    for n in $(picks "$count"); do cases+=("$kind:$n"); done
    case $mode:$kind in
    gpu:launch) # the kernel faults on the device: sticky
        for n in $(samples=3 picks "$count"); do cases+=("launch:$n:700"); done ;;
    host:open | host:write) # a failing disk, not a full one
        for n in $(samples=2 picks "$count"); do cases+=("$kind:$n:EIO"); done ;;
    esac
done < "$work/counts"

# partial RC: whether the run warned of parts it could not do (-w)
partial() {
    [ $warned = 1 ] && [ "$1" -eq 1 ] && [ "$(wc -l < "$work/err")" -gt 1 ] &&
        head -n -1 "$work/err" | grep -q "^$tool: warning: "
}

# failed C RC: why the failed run of case C is not a clean failure ("" when it is)
failed() {
    local c=$1 rc=$2 kind=${1%%:*} code want re reason
    if partial "$rc"; then
        if head -n -1 "$work/err" | grep -vq "^$tool: warning: "; then
            echo "exit 1 with warnings and other lines"
            return
        fi
    elif [ "$(wc -l < "$work/err")" -ne 1 ]; then
        echo "exit $rc without one line"
        return
    fi
    if [ "$mode" = gpu ]; then
        re="^$tool: error: (.*: )?(cuda|hip)(:[0-9]+)?: (cu|hip|cublas|rocblas_)[A-Za-z_0-9]*: (CUDA_ERROR_|hipError|CUBLAS_STATUS_|rocblas_status_)[A-Za-z_]+"
        [ "$rc" -eq 1 ] || { echo "exit $rc"; return; }
        grep -Eq "$re" "$work/err" ||
            echo "exit 1 without one line naming the device, the call and the driver's error"
        return
    fi
    code=${c#*:*:}
    [ "$code" = "$c" ] && code=
    case $kind in
    alloc | mmap) want="1" reason="out of memory" ;;
    open) want="73 74" ;;
    *) want="74" ;;
    esac
    case ${code:-$kind} in
    EIO | read) reason="Input/output error" ;;
    open | write) reason="No space left on device" ;;
    esac
    case " $want " in
    *" $rc "*) ;;
    *) echo "exit $rc, not $want"; return ;;
    esac
    tail -n 1 "$work/err" | grep -Eq "^$tool: error: " || { echo "exit $rc without a line \"$tool: error: ...\""; return; }
    grep -qF "$reason" "$work/err" || echo "exit $rc without \"$reason\" in the line"
}

bad=0 recovered=0 clean=0
for c in "${cases[@]}"; do
    rm -f "$out"
    run "$fail_var=$c" "$@"
    rc=$?
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
    elif [ $rc -eq 124 ]; then
        why="no end within ${limit} s"
    elif [ $rc -gt 128 ]; then
        why="killed by signal $((rc - 128))"
    else
        why=$(failed "$c" $rc)
        if [ -z "$why" ] && [ -e "$out" ] && ! partial $rc; then
            why="exit $rc leaving $out behind"
        elif [ -z "$why" ] && ! listing | cmp -s - "$work/before"; then
            why="exit $rc leaving files behind: $(listing | comm -13 "$work/before" - | tr '\n' ' ')"
        fi
        [ -n "$why" ] || clean=$((clean + 1))
    fi
    if [ -n "$why" ]; then
        bad=$((bad + 1))
        echo "$me: $tool, $fail_var=$c: $why; stderr: $(head -c 600 "$work/err" | tr '\n' '|')"
    fi
    rm -f "$out"
    listing | comm -13 "$work/before" - | while read -r f; do rm -rf "./$f"; done
done
# (the counts' file ends with the stand-in's line of the work's counters,
# KIND=N pairs: not a kind of call)
echo "$me: $tool: ${#cases[@]} faults ($(grep -v = "$work/counts" | tr '\n' ' ' | sed 's/ $//')): $recovered recovered, $clean failed cleanly, $bad bad"
[ $bad -eq 0 ]
