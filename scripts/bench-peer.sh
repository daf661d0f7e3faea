# bench-peer.sh: sourced by scripts/bench*.sh. A peer that cannot run is never
# skipped quietly: not_measured prints `bench: PEER not measured: WHY` on
# standard output and counts it, and the outermost script (bench.sh, or a
# bench-*.sh run alone) ends with the count (bench_summary).
if [ -z "${TQ_BENCH_MISSING:-}" ]; then
    TQ_BENCH_MISSING=$(mktemp "${TMPDIR:-/tmp}/tq-bench-missing.XXXXXX")
    export TQ_BENCH_MISSING
    bench_outermost=1
else
    bench_outermost=0
fi

not_measured() { # PEER WHY
    echo "bench: $1 not measured: $2"
    echo "$1" >> "$TQ_BENCH_MISSING"
}

# py_why PYTHON MODULE...: empty when PYTHON imports every MODULE, else why not
# (the last line of its error: "ModuleNotFoundError: No module named 'PIL'").
py_why() {
    local py=$1; shift
    if [ ! -x "$py" ]; then
        echo "$py does not exist"
        return
    fi
    local m out
    for m in "$@"; do
        out=$("$py" -c "import $m" 2>&1 >/dev/null) && continue
        echo "import $m in $py failed: $(printf '%s\n' "$out" | grep . | tail -n 1)"
        return
    done
}

bench_summary() {
    [ "$bench_outermost" = 1 ] || return 0
    local n
    n=$(grep -c . "$TQ_BENCH_MISSING" || true)
    if [ "$n" -eq 0 ]; then
        echo "bench: every peer measured"
    else
        echo "bench: $n peer(s) not measured: $(paste -sd '\t' "$TQ_BENCH_MISSING" | sed 's/\t/; /g')"
    fi
    rm -f "$TQ_BENCH_MISSING"
}
