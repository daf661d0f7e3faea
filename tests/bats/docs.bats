#!/usr/bin/env bats
# The manual and the README tell the truth about the tools built
# (tests/lib/docs_true.py says what is checked): --help and each man page's
# OPTIONS list the same options, and no page or README line names a tool,
# option or file that does not exist.
load helpers
bats_require_minimum_version 1.5.0

needs_man() { command -v man >/dev/null || skip "man is not installed (make deps-test installs it)"; }

@test "--help and the man pages' OPTIONS agree; pages and README name only what exists" {
    needs_man
    run py "$TESTS_DIR/lib/docs_true.py" "$ROOT_DIR" "$TQ_BIN"
    [ "$output" = ok ] || fail "$output"
}

@test "the check finds an option, a tool and a file that are not there" {
    needs_man
    # a copy of the tree's documents with one untruth of each kind planted
    root="$BATS_TEST_TMPDIR/root"
    mkdir -p "$root"
    cp -r "$ROOT_DIR/man" "$ROOT_DIR/README.md" "$root/"
    sed -i 's/^\.SH OPTIONS$/.SH OPTIONS\n.TP\n.B \\-\\-no\\-such\\-option\nplanted./' "$root/man/tq-score.1"
    printf '\n    tq-simmat --top-kk 5 < q.tq | tq-sort\n\nSee samples/no-such-file.tq.\n' >> "$root/README.md"
    run py "$TESTS_DIR/lib/docs_true.py" "$root" "$TQ_BIN" "$ROOT_DIR"
    [[ "$output" == *"tq-score(1) OPTIONS lists --no-such-option, its --help does not"* ]] || fail "$output"
    [[ "$output" == *"README.md: tq-simmat has no option --top-kk"* ]] || fail "$output"
    [[ "$output" == *"README.md names tq-sort, which is no tool"* ]] || fail "$output"
    [[ "$output" == *"README.md names samples/no-such-file.tq, which is not in the tree"* ]] || fail "$output"
    [ "$(printf '%s\n' "$output" | wc -l)" -eq 4 ] || fail "more than the planted: $output"
}

# issue 35: small files, one job each. Hand-written C (not the generated
# Unicode tables) stays under about 1,000 lines a file and 150 a function (a
# function: from a "{" in column 0 to the "}" in column 0 that ends it).
@test "no hand-written C file over 1,000 lines, no function over 150" {
    cd "$ROOT_DIR"
    big=$(find lib cmd kernels -name '*.c' -o -name '*.h' -o -name '*.cu' |
        grep -v unicode_tables | xargs wc -l | awk '$2 != "total" && $1 > 1000')
    [ -z "$big" ] || fail "files over 1,000 lines: $big"
    long=$(find lib cmd -name '*.c' | sort | xargs awk '
        FNR == 1 { s = 0 }
        /^\{/ { s = FNR; name = prev }
        /^\}/ { if (s && FNR - s > 150) print FILENAME ": " FNR - s " lines: " name; s = 0 }
        { prev = $0 }')
    [ -z "$long" ] || fail "functions over 150 lines: $long"
}
