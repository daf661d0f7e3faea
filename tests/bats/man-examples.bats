#!/usr/bin/env bats
# Every example in every man page runs, in a scratch copy of samples/, and prints
# exactly the output the page shows. A page with no example fails.
load helpers
bats_require_minimum_version 1.5.0

run_page() {
    local page="$1" n=0
    cp -r "$ROOT_DIR/samples/." "$BATS_TEST_TMPDIR/"
    cd "$BATS_TEST_TMPDIR"
    while IFS= read -r ex; do
        n=$((n + 1))
        cmd=$(printf '%s' "$ex" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["cmd"])')
        want=$(printf '%s' "$ex" | "$PY" -c 'import json,sys; print("\n".join(json.load(sys.stdin)["out"]))')
        run --separate-stderr bash -o pipefail -c "$cmd"
        if [ "$status" -ne 0 ] || [ "$output" != "$want" ]; then
            printf 'example %d of %s:\n$ %s\nstatus %s, output:\n%s\nexpected:\n%s\n' \
                "$n" "$page" "$cmd" "$status" "$output$stderr" "$want" >&2
            return 1
        fi
    done < <("$PY" "$TESTS_DIR/lib/manex.py" "$page")
    [ "$n" -gt 0 ] || { echo "$page has no example" >&2; return 1; }
}

@test "man page examples run as documented" {
    for page in "$ROOT_DIR"/man/*.[157]; do
        [ -e "$page" ] || continue
        run_page "$page"
    done
}
