#!/usr/bin/env bats
# tq-score against the float64 NumPy reference of tests/lib/score_ref.py: every
# feature, weights, groups that span batches, --top, --sort, each model kind,
# and the errors. Inputs and model files are written with tqstream.py.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    D="$BATS_TEST_TMPDIR"
    py "$TESTS_DIR/lib/score_ref.py" gen "$D" --d 16 --seed 3
}

# score_check OPTION...: runs tq-score on the sample input, checks the output
score_check() {
    run --separate-stderr tq-score "$@" "$D/in.tq" -o "$D/out.tq"
    [ "$status" -eq 0 ] || { echo "tq-score $*: $stderr" >&2; return 1; }
    run py "$TESTS_DIR/lib/score_ref.py" check "$D" "$D/out.tq" "$@"
    [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
}

@test "consensus within groups that span batches; a group of one scores 0" {
    score_check --consensus
}

@test "query: one reference per group (ids in any order), and one for all" {
    score_check --query "$D/query.tq"
    score_check --query "$D/query1.tq" --consensus --weights 0.5,2
}

@test "feature columns and weights" {
    score_check --feature lp
    score_check --consensus --feature lp --weights -1,0.25
}

@test "--top and --sort" {
    score_check --consensus --top 2
    score_check --consensus --sort
    score_check --query "$D/query.tq" --feature lp --top 3 --sort
}

@test "no group frame: all rows are one group" {
    score_check --consensus --group none --top 5 --sort
}

@test "models: linear, logistic, softmax, mlp (relu, tanh + softmax, gelu + sigmoid)" {
    for m in linear logistic softmax mlp mlp3 mlp-gelu; do
        score_check -m "$D/$m.tq" --sort || { echo "model $m" >&2; return 1; }
    done
    score_check -m "$D/mlp.tq" --query "$D/query.tq" --consensus --feature lp \
        --weights 0.5,1,-2,0.1 --top 4
}

@test "ties rank the earlier row first; NaN ranks last" {
    py - "$D/ties.tq" <<'PYEOF'
import sys, numpy as np, tqstream as ts
f = np.array([1, 3, 3, 2, 3, np.nan, 3], dtype=np.float32)
e = np.ones((7, 2), dtype=np.float32)
open(sys.argv[1], "wb").write(ts.array_frame("emb", e) + ts.array_frame("f", f))
PYEOF
    tq-score --feature f --sort "$D/ties.tq" | tq-cat -t tsv --no-header --name f,rank > "$D/got"
    # by hand: the 3s at rows 1, 2, 4, 6 in row order, then 2, 1, NaN
    printf '3\t1\n3\t2\n3\t3\n3\t4\n2\t5\n1\t6\nnan\t7\n' | diff - "$D/got"
}

@test "same bits whatever --threads" {
    for t in 1 2 3; do
        tq-score -m "$D/mlp.tq" --consensus --query "$D/query.tq" --threads $t "$D/in.tq" > "$D/t$t"
    done
    cmp "$D/t1" "$D/t2" && cmp "$D/t1" "$D/t3"
}

@test "a score and rank in the input are replaced; batches of --batch rows" {
    tq-score --consensus --batch 7 "$D/in.tq" > "$D/once.tq"
    tq-score --feature lp "$D/once.tq" -o "$D/twice.tq"
    run py "$TESTS_DIR/lib/score_ref.py" check "$D" "$D/twice.tq" --feature lp
    [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
    # the 91 rows in score frames of at most 7 rows
    run bash -c "tq-cat --info '$D/once.tq' | awk '\$2 == \"score\" { n += \$4; if (\$4 > m) m = \$4 } END { print n, m }'"
    [ "$output" = "91 7" ]
}

@test "errors: usage (2), missing files (66)" {
    run --separate-stderr tq-score "$D/in.tq"
    [ "$status" -eq 2 ] && [[ "$stderr" == "tq-score: error: nothing to score by"* ]]
    run --separate-stderr tq-score --consensus --weights 1,2 "$D/in.tq"
    [ "$status" -eq 2 ] && [[ "$stderr" == *"--weights has 2 values for 1 feature"* ]]
    run --separate-stderr tq-score --consensus --weights 1,x "$D/in.tq"
    [ "$status" -eq 2 ]
    run --separate-stderr tq-score --consensus --top 0 "$D/in.tq"
    [ "$status" -eq 2 ]
    run --separate-stderr tq-score -m "$D/nope.tq" "$D/in.tq"
    [ "$status" -eq 66 ] && [[ "$stderr" == *"$D/nope.tq"* ]]
    run --separate-stderr tq-score --query "$D/nope.tq" "$D/in.tq"
    [ "$status" -eq 66 ]
    run --separate-stderr tq-score --consensus "$D/nope.tq"
    [ "$status" -eq 66 ]
}

@test "errors: bad model files exit 65 naming the file and what is wrong" {
    py - "$D" <<'PYEOF'
import sys, numpy as np, tqstream as ts
from score_ref import model_frames, write
D = sys.argv[1]
o = np.ones
write(D + "/kind.tq", model_frames("forest", [("w", o(16)), ("b", o(1))]))
write(D + "/missing.tq", model_frames("mlp", [("w1", o((16, 4))), ("b1", o(4)), ("w2", o((4, 1)))]))
write(D + "/chain.tq", model_frames("mlp", [("w1", o((16, 4))), ("b1", o(4)), ("w2", o((3, 1))), ("b2", o(1))]))
write(D + "/bias.tq", model_frames("softmax", [("w", o((16, 3))), ("b", o(2))]))
write(D + "/extra.tq", model_frames("linear", [("w", o(16)), ("b", o(1)), ("w2", o(3))]))
write(D + "/class.tq", model_frames("softmax", [("w", o((16, 3))), ("b", o(3))], **{"class": 3}))
write(D + "/act.tq", model_frames("mlp", [("w1", o((16, 1))), ("b1", o(1))], activation="swish"))
write(D + "/dim.tq", model_frames("linear", [("w", o(8)), ("b", o(1))]))
write(D + "/nohead.tq", [ts.array_frame("w", o(16, dtype=np.float32))])
nan = o((16, 4)); nan[5, 1] = np.nan
write(D + "/nan.tq", model_frames("mlp", [("w1", nan), ("b1", o(4)), ("w2", o((4, 1))), ("b2", o(1))]))
PYEOF
    check() {
        run --separate-stderr tq-score -m "$D/$1.tq" "$D/in.tq"
        [ "$status" -eq 65 ] && [ "${#lines[@]}" -eq 0 ] &&
            [[ "$stderr" == "tq-score: error: $D/$1.tq: "*"$2"* ]] ||
            { echo "$1: status $status: $stderr" >&2; return 1; }
    }
    check kind "unknown model kind 'forest'"
    check missing 'missing bias tensor "b2"'
    check chain '"w2" takes 3 inputs, but the layer before gives 4'
    check bias '"b" must be [3]'
    check extra 'unexpected tensor "w2"'
    check class 'class=3 is not a class 0..2'
    check act "unknown activation 'swish'"
    check dim 'the model takes vectors of dim 8, "emb" from '"$D/in.tq"' has 16'
    check nohead 'no "model" frame'
    check nan 'weight "w1" holds a value that is not finite'
}

@test "errors: data (65): groups not contiguous, query dims and groups, feature frames" {
    py - "$D" <<'PYEOF'
import sys, numpy as np, tqstream as ts
D = sys.argv[1]
e = np.ones((5, 16), dtype=np.float32)
g = np.array([1, 1, 2, 2, 1], dtype=np.int64)
open(D + "/split.tq", "wb").write(ts.array_frame("emb", e) + ts.array_frame("group", g))
open(D + "/q5.tq", "wb").write(ts.array_frame("emb", np.ones((1, 5), dtype=np.float32)))
open(D + "/qmiss.tq", "wb").write(ts.array_frame("group", np.array([7], dtype=np.int64)) +
                                  ts.array_frame("emb", np.ones((1, 16), dtype=np.float32)))
PYEOF
    run --separate-stderr tq-score --consensus "$D/split.tq"
    [ "$status" -eq 65 ] && [[ "$stderr" == *"group 1 comes again at row 4"* ]]
    run --separate-stderr tq-score --query "$D/q5.tq" "$D/in.tq"
    [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [ "$stderr" = 'tq-score: error: query and candidates differ in width: "emb" from '"$D/q5.tq"' has 5 values a row, "emb" from '"$D/in.tq"' has 16' ]
    run --separate-stderr tq-score --query "$D/qmiss.tq" "$D/in.tq"
    [ "$status" -eq 65 ] && [[ "$stderr" == *"no query row for group"* ]]
    run --separate-stderr tq-score --query "$D/query.tq" --group none "$D/in.tq"
    [ "$status" -eq 65 ]
    run --separate-stderr tq-score --feature nope "$D/in.tq"
    [ "$status" -eq 65 ] && [[ "$stderr" == *'no frame "nope"'* ]]
    run --separate-stderr tq-score --feature tag "$D/in.tq"
    [ "$status" -eq 65 ] && [[ "$stderr" == *"one number a row"* ]]
}

# rename IN OUT FROM TO: the stream IN with frames FROM renamed TO
rename() {
    py -c '
import sys, tqstream as tq
fr = tq.read(open(sys.argv[1], "rb").read())
out = b"".join(tq.frame(sys.argv[4] if f["name"] == sys.argv[3] else f["name"], f["dtype"], f["dims"], f["raw"], meta=f["meta"] or None) for f in fr)
open(sys.argv[2], "wb").write(out)' "$@"
}

@test "default frames: emb, else the one rank 2 float frame, else an error naming them" {
    # candidates and query named cand: taken without --emb, said under -v
    rename "$D/in.tq" "$D/cand.tq" emb cand
    rename "$D/query.tq" "$D/qcand.tq" emb cand
    run --separate-stderr tq-score --query "$D/qcand.tq" --consensus -v "$D/cand.tq" -o "$D/o.tq"
    assert_success
    [[ "$stderr" == *'candidates: frame "cand" (the only rank 2 float or code frame; none is named "emb")'* ]]
    [[ "$stderr" == *'query: frame "cand" (its default name)'* ]]
    rename "$D/o.tq" "$D/out.tq" cand emb
    run py "$TESTS_DIR/lib/score_ref.py" check "$D" "$D/out.tq" --query "$D/query.tq" --consensus
    assert_success
    # two rank 2 float frames and no emb: an error naming them
    py -c '
import numpy as np, tqstream as tq
x = np.ones((3, 4), np.float32)
open("'"$D"'/two.tq", "wb").write(tq.array_frame("a", x) + tq.array_frame("b", x))'
    run --separate-stderr tq-score --consensus "$D/two.tq"
    [ "$status" -eq 2 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [ "$stderr" = 'tq-score: error: more than one frame could be the candidates ("a", "b", all rank 2 float or code) and none is named "emb": name one with --emb' ]
    run --separate-stderr sh -c "tq-score --consensus --emb b -v '$D/two.tq' > /dev/null"
    assert_success
    [[ "$stderr" == *'candidates: frame "b" (named by --emb)'* ]]
}

@test "--query: frames of one name on both sides each come from their own input; widths must agree; -v says what came from where" {
    # "emb" and "group" in the candidates and in --query FILE: each from its own
    rename "$D/in.tq" "$D/cand.tq" emb cand
    rename "$D/query.tq" "$D/qref.tq" emb ref
    tq-score --query "$D/qref.tq" --consensus "$D/cand.tq" -o "$D/ref.tq"
    run --separate-stderr sh -c "tq-score --query '$D/query.tq' --consensus -v < '$D/in.tq' > '$D/out.tq'"
    assert_success
    nq=$(py -c 'import sys, numpy as np, tqstream as t; print(sum(t.to_numpy(f).shape[0] for f in t.read(open(sys.argv[1], "rb").read()) if f["name"] == "emb"))' "$D/query.tq")
    nc=$(py -c 'import sys, numpy as np, tqstream as t; print(sum(t.to_numpy(f).shape[0] for f in t.read(open(sys.argv[1], "rb").read()) if f["name"] == "emb"))' "$D/in.tq")
    [[ "$stderr" == *"tq-score: candidates: frame \"emb\" [$nc x 16] from standard input; query: frame \"emb\" [$nq x 16] from $D/query.tq"* ]]
    # the same scores and ranks as with names that cannot mix, and as float64
    run py -c '
import sys, numpy as np, tqstream as t
a, b = (t.read(open(p, "rb").read()) for p in sys.argv[1:3])
for name in ("score", "rank", "key"):
    x = [t.to_numpy(f) for f in a if f["name"] == name]
    y = [t.to_numpy(f) for f in b if f["name"] == name]
    assert x and len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y)), name
print("same")' "$D/out.tq" "$D/ref.tq"
    assert_output "same"
    run py "$TESTS_DIR/lib/score_ref.py" check "$D" "$D/out.tq" --query "$D/query.tq" --consensus
    assert_success
    # tq-embed's rows on both sides, 8 values against 384: one line naming both
    printf 'the cat sat\n' > "$D/q.txt"
    printf 'a dog ran\nthe cat sat on the mat\n' > "$D/c.txt"
    tq-embed -m hash:8 "$D/q.txt" > "$D/q8.tq"
    tq-embed -m hash:384 "$D/c.txt" > "$D/c384.tq"
    run --separate-stderr sh -c "tq-score --query '$D/q8.tq' < '$D/c384.tq' > '$D/bad.tq'"
    [ "$status" -eq 65 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    [ "$stderr" = "tq-score: error: query and candidates differ in width: \"emb\" from $D/q8.tq has 8 values a row, \"emb\" from standard input has 384" ]
}

# tq-score.1 (NaN and infinities): IEEE arithmetic, contained. Row 12 (of a
# group that spans batches) gets a NaN or -inf in its vector or its lp
# feature (tests/lib/scorenan.py): against the clean input, every other row
# keeps its score bits, every other group its ranks, and the poisoned group
# the order of its other rows, with NaN last. The consensus is the mean over
# the group, which every row of it sees: the whole group's scores go NaN, and
# no other group's.
# bats test_tags=san:sample
@test "NaN and infinities stay in their row (their group for --consensus), every feature and model, every device" {
    py "$TESTS_DIR/lib/scorenan.py" gen "$D"
    all_devices
    for dev in $devices; do
        for spec in "row --query $D/query.tq" "row --query $D/query1.tq" "row -m $D/linear.tq" \
            "row -m $D/logistic.tq" "row -m $D/softmax.tq" "row -m $D/mlp.tq" "row -m $D/mlp3.tq" \
            "row -m $D/mlp-gelu.tq" "group --consensus" "group --consensus --query $D/query.tq" \
            "lp --feature lp" "lp --consensus --feature lp -m $D/mlp.tq --weights 1,-2,0.5"; do
            set -- $spec
            what=$1
            shift
            tq-score --device "$dev" "$@" "$D/clean.tq" -o "$D/clean-out.tq"
            for kind in nan inf; do
                in=emb-$kind.tq spread=$what
                [ "$what" = lp ] && in=lp-$kind.tq spread=row
                tq-score --device "$dev" "$@" "$D/$in" -o "$D/bad-out.tq"
                run py "$TESTS_DIR/lib/scorenan.py" check "$D/clean-out.tq" "$D/bad-out.tq" $kind $spread
                [ "$output" = ok ] || fail "$dev $in $*: $output"
            done
        done
    done
    # a NaN in the one reference row of --query reaches every row's score
    py -c '
import numpy as np, tqstream as ts
q = np.ones((1, 16), np.float32); q[0, 2] = np.nan
open("'"$D"'/qnan.tq", "wb").write(ts.array_frame("emb", q))'
    tq-score --query "$D/qnan.tq" --feature lp "$D/clean.tq" | tq-cat -t tsv --no-header --name score > "$D/qn"
    [ "$(sort -u "$D/qn")" = nan ]
}
