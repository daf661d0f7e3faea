#!/bin/sh
# run-bats.sh DIR: runs the Bats suites and closes with "bats: N passed, N failed,
# N skipped"; appends the counts to $TQ_COUNTS when set, for the CI's total.
# Each test's line carries its time (--timing: where CI's time goes).
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Under the sanitizers (CI's second pass, $TQ_BIN in build/san) the tests
# tagged san:sample stay out: their time goes to Python references and to C
# paths the other tests take too, and the first pass ran them.
filter=
case "${TQ_BIN:-}" in
*/san/*)
    filter='!san:sample'
    echo "bats: under the sanitizers, $(cat "$@"/*.bats 2>/dev/null | grep -c '^# bats test_tags=san:sample') tests tagged san:sample left out (the first pass ran them)"
    ;;
esac
bats --tap --timing ${filter:+--filter-tags "$filter"} "$@" | tee "$out"
status=$?
[ -s "$out" ] || status=1
skip=$(grep -c '^ok .* # skip' "$out")
pass=$(($(grep -c '^ok ' "$out") - skip))
fail=$(grep -c '^not ok ' "$out")
echo "bats: $pass passed, $fail failed, $skip skipped"
[ -n "${TQ_COUNTS:-}" ] && echo "$pass $fail $skip" >> "$TQ_COUNTS"
[ "$fail" -eq 0 ] && [ "$status" -eq 0 ]
