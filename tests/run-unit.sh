#!/bin/sh
# run-unit.sh BIN...: runs the C unit tests; each prints "N passed, N failed" and
# exits non-zero on a failure. Prints the sum the same way, and each binary's
# seconds (where CI's time goes).
pass=0; fail=0; status=0
for t in "$@"; do
    t0=$(date +%s)
    out=$("$t" 2>&1); rc=$?
    echo "time: $(basename "$t") $(($(date +%s) - t0)) s"
    printf '%s\n' "$out" | grep -v '^ok ' || true
    p=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' | tail -1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' | tail -1)
    pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0}))
    if [ $rc -ne 0 ]; then
        status=1
        [ -n "$f" ] || { fail=$((fail + 1)); echo "$t: crashed or exited $rc"; }
    fi
done
echo "unit: $pass passed, $fail failed"
[ -n "${TQ_COUNTS:-}" ] && echo "$pass $fail 0" >> "$TQ_COUNTS"
exit $status
