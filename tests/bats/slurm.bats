#!/usr/bin/env bats
# The Slurm samples under a real Slurm: a private one-node cluster
# (tests/cluster/cluster.sh: munged, slurmctld, slurmd in a folder of their
# own) is brought up once for this file; the jobs are submitted with sbatch,
# chained by dependencies, cancelled with scancel, and their results compared
# with single runs of the tools and float64 references. Without slurmdbd there
# is no sacct: a job's end state and exit code are read from the cluster's job
# completion log (JobCompType=jobcomp/filetxt), one line a job.
load helpers
bats_require_minimum_version 1.5.0

CLUSTER_SH="$TESTS_DIR/cluster/cluster.sh"

setup_file() {
    export CLUSTER=$BATS_FILE_TMPDIR/cluster
    local err st=0
    # the guard that cluster.sh leaves watches this Bats process ($$): were
    # it killed before teardown_file, the cluster still goes
    err=$("$CLUSTER_SH" up "$CLUSTER" $$ 2>&1) || st=$?
    [ "$st" -eq 77 ] && skip "${err#cluster.sh: }"
    [ "$st" -eq 0 ] || { echo "$err" >&2; return 1; }
    export SLURM_CONF=$CLUSTER/slurm.conf JOBCOMP=$CLUSTER/log/jobcomp.txt
}

teardown_file() {
    "$CLUSTER_SH" down "$CLUSTER"
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    S="$ROOT_DIR/samples"
    # the jobs of this test: the completion log's lines with its folder
    HERE=" WorkDir=$PWD "
}

teardown() {
    # a test that failed half way leaves no job to the next one
    scancel --quiet --partition=tq 2>/dev/null || true
    for i in $(seq 50); do
        [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
        sleep 0.1
    done
}

# ended [NAME]: the completion log's lines of this test's jobs (named NAME)
ended() {
    grep -F -e "$HERE" "$JOBCOMP" 2>/dev/null | grep -F -e " Name=${1:-}" || true
}

# wait_ended NAME COUNT: until COUNT jobs of this test named NAME have ended
# (at most 60 s, then the queue and the logs say why)
wait_ended() {
    local i
    for i in $(seq 600); do
        [ "$(ended "$1" | wc -l)" -ge "$2" ] && return 0
        sleep 0.1
    done
    echo "waited 60 s for $2 jobs named $1 to end; the queue:" >&2
    squeue >&2
    tail -n 5 ./*.log "$CLUSTER/log/slurmctld.log" >&2
    return 1
}

# the shard-search sample on this node: one CPU a task (it asks for four,
# more than a test machine may have: the option on the command line wins);
# no command of a test waits more than a minute
shard_search() {
    timeout 60 sbatch --cpus-per-task=1 "$@" "$S/slurm/shard-search.sbatch"
}

@test "cluster.sh: a private cluster, and no daemon of it left after teardown, even when the command failed or its caller died" {
    # the cluster of this file is ours: its own ports, socket and controller
    grep -q "^AuthInfo=socket=$CLUSTER/munge/munge.socket$" "$SLURM_CONF"
    [ "$(grep -cE '^Slurm(ctld|d)Port=681[78]$' "$SLURM_CONF")" -eq 0 ]
    scontrol show config | grep -q "^SLURM_CONF *= $SLURM_CONF$"
    [ "$(sinfo -h -o '%D %T %c')" = "1 idle $(nproc --all)" ]
    # run: a second cluster for one command that leaves a job running and an
    # srun waiting, then fails: its status comes back, nothing of it stays
    run --separate-stderr "$CLUSTER_SH" run bash -c '
        echo "$TQ_CLUSTER_DIR" > dir.txt
        sbatch -o /dev/null --wrap "sleep 300" >/dev/null
        srun -n1 sleep 300 </dev/null >/dev/null 2>&1 &
        for i in $(seq 100); do [ "$(squeue -h -t R | wc -l)" -eq 2 ] && break; sleep 0.1; done
        squeue -h -t R | wc -l
        exit 3'
    [ "$status" -eq 3 ] && [ "$output" = 2 ]
    run env -u SLURM_CONF "$CLUSTER_SH" ours "$(cat dir.txt)"
    [ "$status" -eq 0 ] && [ -z "$output" ]
    [ ! -e "$(cat dir.txt)" ] # and its folder is gone
    # up with a process to watch: when it dies without a teardown, the guard
    # tears down within seconds
    sleep 300 3>&- &
    watched=$!
    "$CLUSTER_SH" up c2 "$watched"
    SLURM_CONF=$PWD/c2/slurm.conf sbatch -o /dev/null --wrap "sleep 300"
    [ -n "$(env -u SLURM_CONF "$CLUSTER_SH" ours c2)" ]
    kill "$watched"
    for i in $(seq 50); do
        [ -z "$(env -u SLURM_CONF "$CLUSTER_SH" ours c2)" ] && break
        sleep 0.2
    done
    run env -u SLURM_CONF "$CLUSTER_SH" ours c2
    [ "$status" -eq 0 ] && [ -z "$output" ]
}

@test "cluster.sh: says why it cannot bring a cluster up (programs missing, not root, a daemon that stops) and leaves nothing" {
    # munged, slurmctld and slurmd live in /usr/sbin
    run --separate-stderr env PATH=/usr/bin:/bin "$CLUSTER_SH" up c1
    [ "$status" -eq 77 ]
    [[ "$stderr" == *"cannot run a Slurm cluster here: missing: munged slurmctld slurmd ("* ]]
    # a slurmd that stops at once: its own words come back, and the munged
    # and slurmctld already started are gone
    mkdir fake
    printf '#!/bin/sh\n[ "$1" = -C ] && exit 1\necho "slurmd: fatal: Unable to bind listen port: Address already in use" >&2\nexit 1\n' > fake/slurmd
    chmod +x fake/slurmd
    run --separate-stderr env PATH="$PWD/fake:$PATH" "$CLUSTER_SH" up c2
    [ "$status" -eq 77 ]
    [[ "$stderr" == *"slurmd stopped at start: "*"Unable to bind listen port: Address already in use"* ]]
    run env -u SLURM_CONF "$CLUSTER_SH" ours c2
    [ "$status" -eq 0 ] && [ -z "$output" ]
    command -v setpriv >/dev/null || skip "setpriv is not installed"
    chmod 755 "$BATS_TEST_TMPDIR"
    run --separate-stderr setpriv --reuid=65534 --regid=65534 --clear-groups "$CLUSTER_SH" up c3
    [ "$status" -eq 77 ] && [[ "$stderr" == *"not root"* ]]
}

@test "shard-search.sbatch: a real array job, its merge started by the dependency, equals a single run" {
    needs_numpy
    py "$TESTS_DIR/lib/simref.py" make db.tq 0 500 16 4 str
    py "$TESTS_DIR/lib/simref.py" make q.tq 0 40 16 5 i64
    export TQ_DB=$PWD/db.tq TQ_QUERIES=$PWD/q.tq TQ_OUT=$PWD/top.tq TQ_K=5
    run shard_search --wait --array=0-3
    [ "$status" -eq 0 ]
    array=${output##* }
    # the four tasks ended well, each its own job of the array
    [ "$(ended tq-shard-search | grep -c "JobState=COMPLETED .* ArrayJobId=$array .* ExitCode=0:0")" -eq 4 ]
    for i in 0 1 2 3; do
        ended tq-shard-search | grep -q " ArrayJobId=$array ArrayTaskId=$i "
        [ ! -s "tq-shard-search-${array}_$i.log" ] # quiet when all is well
    done
    # the merge was submitted by task 0 and started by Slurm once they ended
    wait_ended tq-shard-merge 1
    ended tq-shard-merge | grep -q 'JobState=COMPLETED .* ExitCode=0:0'
    tq-simmat --db db.tq -k 5 < q.tq > single.tq
    cmp single.tq top.tq
    py "$TESTS_DIR/lib/simref.py" topk top.tq q.tq db.tq cosine 5
    [ ! -e top.tq.shards ]
}

@test "shard-search.sbatch: a failed task makes the merge refuse naming its shard; rerunning that task completes the job" {
    needs_numpy
    py "$TESTS_DIR/lib/simref.py" make db.tq 0 500 16 4 str
    py "$TESTS_DIR/lib/simref.py" make q.tq 0 40 16 5 i64
    tq-simmat --db db.tq -k 5 < q.tq > single.tq
    export TQ_DB=$PWD/db.tq TQ_QUERIES=$PWD/q.tq TQ_OUT=$PWD/top.tq TQ_K=5
    # held, then released a task at a time: tasks 0, 1 and 3 find the
    # database, task 2 runs when it has gone (a node that does not see it)
    array=$(shard_search --parsable --hold --array=0-3)
    scontrol release "${array}_0" "${array}_1" "${array}_3"
    wait_ended tq-shard-search 3
    mv db.tq db.away
    scontrol release "${array}_2"
    wait_ended tq-shard-merge 1
    # task 2 failed (tq-simmat's 66, in its log), the others did not
    ended tq-shard-search | grep -q "JobState=FAILED .* ArrayTaskId=2 .* ExitCode=66:0"
    [ "$(ended tq-shard-search | grep -c 'JobState=COMPLETED .* ExitCode=0:0')" -eq 3 ]
    grep -q "db.tq: cannot open" "tq-shard-search-${array}_2.log"
    # the merge ran (afterany) and refused: a non-zero state, the shard named
    ended tq-shard-merge | grep -q 'JobState=FAILED .* ExitCode=66:0'
    merge=$(ended tq-shard-merge | sed 's/^JobId=\([0-9]*\) .*/\1/')
    grep -q "shard 2 of 4 missing .*rerun: TQ_SHARDS=4 sbatch --array=2 shard-search.sbatch" \
        "tq-shard-merge-$merge.log"
    [ ! -e top.tq ] && [ -e top.tq.shards/shard-3-of-4.tq ]
    # sacct needs slurmdbd, which this cluster does not run: it says so
    run sacct -j "$array"
    [ "$status" -ne 0 ]
    # the rerun the merge asked for: task 2 alone, and its own merge
    mv db.away db.tq
    TQ_SHARDS=4 shard_search --array=2
    wait_ended tq-shard-merge 2
    [ "$(ended tq-shard-merge | grep -c 'JobState=COMPLETED .* ExitCode=0:0')" -eq 1 ]
    cmp single.tq top.tq
    # tasks 0, 1 and 3 ran once: only task 2 ran twice
    [ "$(ended tq-shard-search | wc -l)" -eq 5 ]
}

@test "embed-search.sbatch: an embed array, a join, a dependent search array and the merge equal one embed and one search" {
    needs_numpy
    # 3000 lines of words from a 300-word vocabulary (and a few empty ones,
    # which tq-embed skips), the questions: ten of its lines, reworded
    awk 'BEGIN { s = 7; for (l = 0; l < 3000; l++) { line = ""
            if (l % 97 == 13) { print ""; continue }
            for (w = 0; w < 6 + l % 5; w++) { s = (s * 1103515245 + 12345) % 2147483648
                line = line (w ? " " : "") "w" int(s / 65536) % 300 }
            print line } }' > corpus.txt
    awk 'NR % 300 == 1 { $2 = "changed"; print }' corpus.txt > questions.txt
    export TQ_CORPUS=$PWD/corpus.txt TQ_QUESTIONS=$PWD/questions.txt TQ_OUT=$PWD/top.tq TQ_K=5
    run --separate-stderr "$S/slurm/embed-search.sbatch" submit 4 --cpus-per-task=1
    [ "$status" -eq 0 ]
    [[ "$output" =~ ^embed=([0-9]+)\ join=([0-9]+)\ search=([0-9]+)$ ]]
    embed=${BASH_REMATCH[1]} search=${BASH_REMATCH[3]}
    wait_ended tq-shard-merge 1
    # every step ran as the job it should be, in order, and ended well
    [ "$(ended tq-embed | grep -c "JobState=COMPLETED .* ArrayJobId=$embed ")" -eq 4 ]
    ended tq-embed-join | grep -q 'JobState=COMPLETED'
    [ "$(ended tq-shard-search | grep -c "JobState=COMPLETED .* ArrayJobId=$search ")" -eq 4 ]
    ended tq-shard-merge | grep -q 'JobState=COMPLETED'
    # each embed task took its quarter of the lines: its part's keys
    for i in 0 1 2 3; do
        tq-cat -t tsv --name key "top.tq.work/part-$i-of-4.tq" | sed 1d > keys-$i.txt
        [ "$(head -1 keys-$i.txt)" -ge $((750 * i)) ] && [ "$(tail -1 keys-$i.txt)" -lt $((750 * (i + 1))) ]
    done
    # the same bytes as one embed of the whole corpus and one search
    awk '{ print NR - 1 "\t" $0 }' corpus.txt | tq-embed --tsv > whole.tq
    tq-embed questions.txt > q.tq
    tq-simmat --db whole.tq -k 5 < q.tq > single.tq
    cmp single.tq top.tq
    # and the float64 reference on those vectors, keys included
    py "$TESTS_DIR/lib/simref.py" topk top.tq q.tq whole.tq cosine 5
    [ "$(cat keys-*.txt | wc -l)" -eq "$(grep -c . corpus.txt)" ]
}

@test "nightly-dedup.sh: run as a job twice on a growing file, equal one greedy dedup" {
    needs_numpy
    export TQ_DEDUP=0.8
    head -4 "$S/near-dups.txt" > feed.txt
    printf 'Our train was delayed by 40 min' >> feed.txt
    # (waiting on the completion log: sbatch --wait polls every 2 s)
    sbatch -o dedup-1.log "$S/slurm/nightly-dedup.sh" feed.txt st
    wait_ended nightly-dedup.sh 1
    [ "$(cat st/current/offset)" -eq "$(head -4 "$S/near-dups.txt" | wc -c)" ]
    printf 'utes because of a signal failure.\n' >> feed.txt
    tail -n +6 "$S/near-dups.txt" >> feed.txt
    sbatch -o dedup-2.log "$S/slurm/nightly-dedup.sh" feed.txt st
    wait_ended nightly-dedup.sh 2
    [ "$(ended nightly-dedup.sh | grep -c 'JobState=COMPLETED .* ExitCode=0:0')" -eq 2 ]
    [ ! -s dedup-1.log ] && [ ! -s dedup-2.log ]
    tq-embed feed.txt > all.tq
    py "$TESTS_DIR/lib/greedy.py" dedup all.tq 0.8 > keys.txt
    awk 'FILENAME == ARGV[1] { keep[$1] = 1; next } (FNR - 1) in keep' keys.txt feed.txt > want.txt
    diff want.txt st/current/kept.txt
}

# feed_one FILE N: writes FILE into the pipe qpipe (for the task that opens
# it), then waits until N tasks of the current array have ended
feed_one() {
    timeout 60 sh -c "cat $1 > qpipe"
    local i
    for i in $(seq 300); do
        [ "$(ended tq-shard-search | grep -c " ArrayJobId=$array ")" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

@test "scancel during a task: no half-written output, and the same submission rerun completes" {
    needs_numpy
    py "$TESTS_DIR/lib/simref.py" make db.tq 0 500 16 4 str
    # the queries come through a named pipe, fed by the test: task 1 has read
    # some of them and written part of its output when it is cancelled
    py "$TESTS_DIR/lib/simref.py" make qa.tq 0 300 16 5 i64
    py "$TESTS_DIR/lib/simref.py" make qb.tq 0 37 16 6 i64
    cat qa.tq qb.tq > q.tq
    mkfifo qpipe
    export TQ_DB=$PWD/db.tq TQ_QUERIES=$PWD/qpipe TQ_OUT=$PWD/top.tq TQ_K=100
    # one task at a time (%1), so that each reads the pipe alone; a task is
    # fed once the one before has finished (and closed the pipe)
    array=$(shard_search --parsable --array=0-1%1)
    feed_one q.tq 1
    timeout 60 sh -c 'cat qa.tq; sleep 60' > qpipe 3>&- &
    feeder=$!
    tmp=
    for i in $(seq 300); do
        tmp=$(find top.tq.shards -name '.shard-*-of-2.tq.tmp-*' -size +0 2>/dev/null)
        [ -n "$tmp" ] && break
        sleep 0.1
    done
    [ -n "$tmp" ] # the second task is half way through its output
    scancel "$array"
    wait_ended tq-shard-merge 1
    kill "$feeder" 2>/dev/null || true
    wait "$feeder" || true
    [ "$(ended tq-shard-search | grep -c "JobState=CANCELLED .* ArrayJobId=$array ")" -eq 1 ]
    [ "$(ended tq-shard-search | grep -c "JobState=COMPLETED .* ArrayJobId=$array ")" -eq 1 ]
    # the cancelled task left nothing, neither its output nor the temporary:
    # the shard of the task that ended is all there is
    [ "$(ls -A top.tq.shards)" = "$(ls top.tq.shards)" ]
    [ "$(ls top.tq.shards | wc -l)" -eq 1 ] && [ ! -e top.tq ]
    ended tq-shard-merge | grep -q 'JobState=FAILED .* ExitCode=66:0'
    # the same submission again: both tasks run, the merge completes
    array=$(shard_search --parsable --array=0-1%1)
    feed_one q.tq 1 # the shard left by the cancelled run is replaced
    feed_one q.tq 2
    wait_ended tq-shard-merge 2
    tq-simmat --db db.tq -k 100 < q.tq > single.tq
    cmp single.tq top.tq
}

@test "MPI under Slurm: srun --mpi=pmix and mpirun inside salloc start a 2-rank Open MPI program" {
    command -v mpicc >/dev/null || skip "mpicc is not installed (make deps-test installs libopenmpi-dev)"
    srun --mpi=list 2>&1 | grep -qw pmix || skip "this Slurm has no pmix MPI plugin"
    mpicc -O2 -o hello "$TESTS_DIR/cluster/mpi-hello.c"
    # each rank says its rank and the sum of all ranks (0 + 1) from MPI_Allreduce
    run --separate-stderr timeout 60 srun -n 2 --mpi=pmix ./hello
    [ "$status" -eq 0 ]
    [ "$(sort <<< "$output")" = "$(printf 'rank 0 of 2, sum 1\nrank 1 of 2, sum 1')" ]
    # Open MPI's own launcher in an allocation (it refuses root unless told)
    open_mpi_env
    run --separate-stderr timeout 60 salloc -n 2 mpirun ./hello
    [ "$status" -eq 0 ]
    [ "$(sort <<< "$output")" = "$(printf 'rank 0 of 2, sum 1\nrank 1 of 2, sum 1')" ]
}

@test "tq-train under srun -n 2 --mpi=pmix: the same model bytes as one rank (adam, and lbfgs)" {
    [ -x "$TQ_BIN/tq-train" ] || skip "bin/tq-train is not built on this branch (issue 14)"
    needs_mpi_train
    needs_numpy
    open_mpi_env
    # 512 examples of 8 features, 3 classes from a linear rule with noise
    py -c '
import numpy as np, tqstream as tqs
rng = np.random.default_rng(5)
x = rng.standard_normal((512, 8)).astype(np.float32)
y = np.argmax(x @ rng.standard_normal((8, 3)) + 0.3 * rng.standard_normal((512, 3)), axis=1)
with open("train.tq", "wb") as f:
    for b in range(0, 512, 128):
        f.write(tqs.array_frame("x", x[b:b + 128]))
        f.write(tqs.array_frame("y", y[b:b + 128].astype(np.int64)))
'
    opts=(--model softmax --x x --y y --batch 64 --epochs 3 --seed 11)
    # tq-train.1 (MPI): any number of ranks gives the same bytes (a run without
    # MPI takes each batch in one pass, and may differ in the last bits)
    timeout 60 srun -n 1 --mpi=pmix "$TQ_BIN/tq-train" "${opts[@]}" -o one.tq train.tq
    # srun splits the global batch over 2 ranks; rank 0 writes the model
    timeout 60 srun -n 2 --mpi=pmix "$TQ_BIN/tq-train" "${opts[@]}" -o two.tq train.tq
    cmp one.tq two.tq
    # the default solver of a softmax model, full-batch L-BFGS (issue 38): the
    # same bytes for 1 and 2 ranks, and as a run without MPI
    opts=(--model softmax --x x --y y --standardize)
    timeout 60 srun -n 1 --mpi=pmix "$TQ_BIN/tq-train" "${opts[@]}" -o lb1.tq train.tq
    timeout 60 srun -n 2 --mpi=pmix "$TQ_BIN/tq-train" "${opts[@]}" -o lb2.tq train.tq
    "$TQ_BIN/tq-train" "${opts[@]}" -o lb0.tq train.tq
    cmp lb1.tq lb2.tq
    cmp lb0.tq lb2.tq
}

@test "srun -n 3 on a node with 2 GPUs (the stand-in's): each task takes cuda:SLURM_LOCALID mod 2, said under -v" {
    [ -n "${TQ_STANDIN_LIB:-}" ] && [ -f "$TQ_STANDIN_LIB" ] ||
        skip "no stand-in driver (make standin builds it; it needs g++)"
    export TQ_CUDA_DRIVER="$TQ_STANDIN_LIB" TQ_CUBLAS="$TQ_STANDIN_LIB" TQ_STANDIN_DEVICES=2
    tq-cat --list-devices | grep -q '^cuda:1 ' || skip "this build has no CUDA backend (nvcc was missing)"
    printf 'the cat sat\non the mat\na dog ran\n' | tq-embed -m hash:8 -o e.tq
    tq-simmat --device cpu --topk 2 e.tq -o cpu.tq
    run --separate-stderr timeout 60 srun --overcommit -n 3 sh -c \
        'tq-simmat -v --device cuda --topk 2 e.tq -o r$SLURM_PROCID.tq 2>&1 | grep ": device cuda" | sed "s/^/$SLURM_PROCID /"'
    [ "$status" -eq 0 ] || { echo "$stderr" >&2; false; }
    [ "$(sort <<< "$output")" = "$(printf '%s\n' \
        "0 tq-simmat: device cuda: cuda:0 (local rank SLURM_LOCALID=0 mod 2 devices)" \
        "1 tq-simmat: device cuda: cuda:1 (local rank SLURM_LOCALID=1 mod 2 devices)" \
        "2 tq-simmat: device cuda: cuda:0 (local rank SLURM_LOCALID=2 mod 2 devices)")" ] ||
        fail "$output"
    for r in 0 1 2; do cmp "r$r.tq" cpu.tq; done
}
