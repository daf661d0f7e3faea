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

# render PAGE: the page as an 80-column terminal shows it, by man, else groff,
# else nroff (formatting stripped).
render() {
    if command -v man >/dev/null; then
        MANWIDTH=80 man -l "$1" 2>/dev/null
    elif command -v groff >/dev/null; then
        groff -man -Tutf8 -rLL=80n -P-cbou "$1" 2>/dev/null
    else
        nroff -man -rLL=80n "$1" 2>/dev/null | sed 's/.\x08//g'
    fi
}

@test "every man page renders within 80 columns" {
    command -v man >/dev/null || command -v groff >/dev/null || command -v nroff >/dev/null ||
        skip "neither man, groff nor nroff is installed: the widths of the man pages are not checked"
    # characters, not bytes: a UTF-8 rendering has curly quotes and dashes
    export LC_ALL=C.UTF-8
    n=0
    for page in "$ROOT_DIR"/man/*.[157]; do
        out=$(render "$page")
        [ "$(printf '%s\n' "$out" | wc -l)" -gt 20 ] || fail "$page: nothing rendered"
        while IFS= read -r line; do
            [ "${#line}" -le 80 ] || fail "$(basename "$page"): ${#line} columns: $line"
        done <<<"$out"
        # and in ASCII, by bytes, as awk counts them
        wide=$(LC_ALL=C render "$page" | awk 'length > 80')
        [ -z "$wide" ] || fail "$(basename "$page"): over 80 columns (ASCII): $wide"
        n=$((n + 1))
    done
    [ "$n" -ge 10 ] || fail "only $n man pages"
}
