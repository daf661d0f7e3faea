#!/usr/bin/env bats
# The sample scripts of samples/ (search from text, dedup of text, the Slurm
# shard search, the nightly dedup) run here and their results are compared
# with float64 NumPy references (tests/lib/greedy.py) or with a single run of
# tq-simmat, not only their exit status.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    S="$ROOT_DIR/samples"
}

@test "samples/search.sh: the three nearest documents of each question, as text" {
    printf 'Is the library open on Saturdays?\nwhen is the bread baked\nthe dog near the station\n' > q.txt
    "$S/search.sh" "$S/docs.txt" q.txt > got.txt
    # the reference: the same embeddings, cosine in float64, lines by key
    tq-embed "$S/docs.txt" > docs.tq
    tq-embed q.txt > q.tq
    py "$TESTS_DIR/lib/greedy.py" topk docs.tq q.tq 3 > want.tsv
    py -c '
import sys
docs = open(sys.argv[1]).read().split("\n")
qs = open("q.txt").read().split("\n")
got = open("got.txt").read().split("\n")[:-1]
want = [l.split("\t") for l in open("want.tsv").read().split("\n")[:-1]]
assert len(got) == 4 * len(want), got
for n, w in enumerate(want):
    assert got[4 * n] == qs[n], (got[4 * n], qs[n])
    for r in range(3):
        score, text = got[4 * n + 1 + r].strip().split("\t")
        assert text == docs[int(w[r])], (n, r, text, docs[int(w[r])])
        # printed with 3 decimals: within 5e-4 plus the f32 rounding
        assert abs(float(score) - float(w[3 + r])) <= 5.1e-4, (score, w[3 + r])
' "$S/docs.txt"
    grep -q 'The library opens at nine' <(sed -n 2p got.txt)
}

@test "samples/dedup.sh: the lines a float64 greedy dedup keeps, in order" {
    for t in 0.8 0.95; do
        "$S/dedup.sh" "$t" "$S/near-dups.txt" > got.txt
        tq-embed "$S/near-dups.txt" > all.tq
        py "$TESTS_DIR/lib/greedy.py" dedup all.tq "$t" > keys.txt
        awk 'FILENAME == ARGV[1] { keep[$1] = 1; next } (FNR - 1) in keep' keys.txt \
            "$S/near-dups.txt" > want.txt
        diff want.txt got.txt
    done
    # the sample has four near-duplicates at 0.8: they go, the first of each stays
    [ "$("$S/dedup.sh" 0.8 "$S/near-dups.txt" | wc -l)" -eq 5 ]
}

@test "samples/slurm/shard-search.sbatch: array tasks then the merge equal a single run" {
    py "$TESTS_DIR/lib/simref.py" make db.tq 0 500 16 4 str
    py "$TESTS_DIR/lib/simref.py" make q.tq 0 40 16 5 i64
    export TQ_DB=$PWD/db.tq TQ_QUERIES=$PWD/q.tq TQ_OUT=$PWD/top.tq TQ_K=5 TQ_SUBMIT_MERGE=0
    for i in 0 1 2 3; do
        SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_COUNT=4 "$S/slurm/shard-search.sbatch"
    done
    [ ! -e top.tq ]
    "$S/slurm/shard-search.sbatch" merge
    tq-simmat --db db.tq -k 5 < q.tq > single.tq
    cmp single.tq top.tq
    py "$TESTS_DIR/lib/simref.py" topk top.tq q.tq db.tq cosine 5
    [ ! -e top.tq.shards ]
    # a missing shard: the merge refuses (66), names it and the rerun, no result file
    rm top.tq
    for i in 0 2; do
        SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_COUNT=3 "$S/slurm/shard-search.sbatch"
    done
    run --separate-stderr "$S/slurm/shard-search.sbatch" merge
    [ "$status" -eq 66 ] && [ ! -e top.tq ]
    [[ "$stderr" == *"shard 1 of 3 missing"*"TQ_SHARDS=3 sbatch --array=1 "* ]]
    # the rerun of that task alone (SLURM_ARRAY_TASK_COUNT is then 1) completes it
    SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=1 TQ_SHARDS=3 "$S/slurm/shard-search.sbatch"
    "$S/slurm/shard-search.sbatch" merge
    cmp single.tq top.tq
}

@test "samples/slurm/nightly-dedup.sh: runs on a growing file equal one greedy dedup" {
    export TQ_DEDUP=0.8
    # day 1: four lines and half of a fifth
    head -4 "$S/near-dups.txt" > feed.txt
    printf 'Our train was delayed by 40 min' >> feed.txt
    run --separate-stderr "$S/slurm/nightly-dedup.sh" feed.txt st
    [ "$status" -eq 0 ] && [ -z "$stderr" ]
    [ "$(cat st/current/offset)" -eq "$(head -4 "$S/near-dups.txt" | wc -c)" ]
    # day 2: the rest of it and more lines; day 3: nothing new
    printf 'utes because of a signal failure.\n' >> feed.txt
    tail -n +6 "$S/near-dups.txt" >> feed.txt
    "$S/slurm/nightly-dedup.sh" feed.txt st
    cp st/current/kept.txt day2.txt
    run --separate-stderr "$S/slurm/nightly-dedup.sh" feed.txt st
    [ "$status" -eq 0 ] && [ -z "$stderr" ]
    diff day2.txt st/current/kept.txt
    # the reference: one greedy pass over the whole file in float64
    tq-embed feed.txt > all.tq
    py "$TESTS_DIR/lib/greedy.py" dedup all.tq 0.8 > keys.txt
    awk 'FILENAME == ARGV[1] { keep[$1] = 1; next } (FNR - 1) in keep' keys.txt feed.txt > want.txt
    diff want.txt st/current/kept.txt
    [ "$(ls st | grep -c '^gen\.')" -eq 1 ]
    # another run holds the lock: 75 at once; a file that shrank: 65
    flock st/lock sleep 5 &
    sleep 0.5
    run --separate-stderr "$S/slurm/nightly-dedup.sh" feed.txt st
    [ "$status" -eq 75 ] && [ "${#stderr_lines[@]}" -eq 1 ]
    wait
    head -2 feed.txt > short.txt
    cp -r st st2
    run --separate-stderr "$S/slurm/nightly-dedup.sh" short.txt st2
    [ "$status" -eq 65 ]
    run --separate-stderr "$S/slurm/nightly-dedup.sh" missing.txt st
    [ "$status" -eq 66 ]
    diff want.txt st/current/kept.txt
}
