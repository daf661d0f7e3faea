#!/usr/bin/env bats
# How a device is chosen beyond its name (tq(7) "DEVICES"), on the tests'
# stand-in GPU driver (tests/standin, TQ_STANDIN_DEVICES of them): auto keeps
# small work on the CPU without loading the driver, takes the GPU for work
# over TQ_AUTO_MIN_FLOPS, reads a pipe ahead to know its size; under mpirun
# or srun each local rank takes its own device, among those that
# CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES leave. Each choice is checked
# by its -v line and by the output's bytes against --device cpu.
load helpers
bats_require_minimum_version 1.5.0

setup() {
    use_standin_driver
    unset TQ_AUTO_MIN_FLOPS OMPI_COMM_WORLD_LOCAL_RANK MPI_LOCALRANKID MV2_COMM_WORLD_LOCAL_RANK \
        SLURM_LOCALID CUDA_VISIBLE_DEVICES HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES
    tq-cat --list-devices | grep -q '^cuda:0 ' || skip "this build has no CUDA backend (nvcc was missing)"
    cd "$BATS_TEST_TMPDIR"
    printf 'the cat sat\non the mat\na dog ran\n' > in.txt
    tq-embed -m hash:8 in.txt -o e.tq # 3 x 8: simmat's self work is 2*3*3*8 = 144 flop
}

# device_line TOOL ARGS...: the tool's -v line "TOOL: device ..." into $dline,
# its output in out.tq
device_line() {
    local tool=$1
    shift
    run --separate-stderr "$tool" -v "$@" -o out.tq
    [ "$status" -eq 0 ] || { echo "$tool $*: $stderr" >&2; return 1; }
    dline=$(grep "^$tool: device " <<< "$stderr") || { echo "no device line: $stderr" >&2; return 1; }
    startup=$(grep -E "^$tool: (cuda|hip):[0-9]+: start " <<< "$stderr" || true)
}

@test "auto, small work: the CPU, without loading the GPU driver; -v says why; the CPU's bytes" {
    TQ_STANDIN_COUNTS=$PWD/counts device_line tq-simmat --topk 2 e.tq
    [[ "$dline" == "tq-simmat: device auto: cpu (work 144 flop < 2e+10 (threads x 1e10): a GPU's start-up costs more)" ]] ||
        [[ "$dline" =~ ^tq-simmat:\ device\ auto:\ cpu\ \(work\ 144\ flop\ \<\ [0-9.e+]+\ \(threads\ x\ 1e10\) ]] || fail "$dline"
    [ -z "$startup" ]
    [ ! -e counts ] # the stand-in, had it been loaded, counts its calls at exit
    tq-simmat --device cpu --topk 2 e.tq -o cpu.tq
    cmp out.tq cpu.tq
}

@test "auto: the threshold is TQ_AUTO_MIN_FLOPS, against the tool's documented work (simmat: 2 nq ndb d)" {
    TQ_AUTO_MIN_FLOPS=145 device_line tq-simmat --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device auto: cpu (work 144 flop < 145 (TQ_AUTO_MIN_FLOPS): a GPU's start-up costs more)"
    TQ_AUTO_MIN_FLOPS=144 device_line tq-simmat --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device auto: cuda:0 (work 144 flop >= 144 (TQ_AUTO_MIN_FLOPS))"
    [[ "$startup" =~ ^tq-simmat:\ cuda:0:\ start\ [0-9.]+\ s:\ driver\ [0-9.]+\ s,\ context\ [0-9.]+\ s,\ kernels\ [0-9.]+\ s,\ cuBLAS\ [0-9.]+\ s$ ]] ||
        fail "start-up line: $startup"
    tq-simmat --device cpu --topk 2 e.tq -o cpu.tq
    cmp out.tq cpu.tq # the top-k lists are the CPU's bit for bit (tq(7))
    # a query file against --db: 2 x 3 x 3 x 8 again
    TQ_AUTO_MIN_FLOPS=145 device_line tq-simmat --topk 2 --db e.tq e.tq
    [[ "$dline" == *"auto: cpu (work 144 flop < 145"* ]] || fail "$dline"
    TQ_AUTO_MIN_FLOPS=0 device_line tq-simmat --topk 2 --db e.tq e.tq
    assert_equal "$dline" "tq-simmat: device auto: cuda:0 (any work: TQ_AUTO_MIN_FLOPS=0)"
}

@test "auto with an explicit device: --device cuda and TQ_DEVICE=cuda always take the GPU" {
    device_line tq-simmat --device cuda --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device cuda: cuda:0"
    [ -n "$startup" ]
    TQ_DEVICE=cuda device_line tq-simmat --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device cuda: cuda:0"
}

@test "auto on a pipe: a short one is read ahead and counted; one past 16 MiB is large work" {
    run --separate-stderr sh -c 'cat e.tq | tq-simmat -v --topk 2 -o pipe.tq'
    assert_success
    [[ "$stderr" == *"tq-simmat: device auto: cpu (work 144 flop <"* ]] || fail "$stderr"
    tq-simmat --device cpu --topk 2 e.tq -o cpu.tq
    cmp pipe.tq cpu.tq
    # 4200 rows of 1024 f32: 17 MB through the pipe, read ahead then fed on
    seq 4200 | sed 's/$/ some words/' | tq-embed -m hash:1024 -o big.tq
    tq-embed -m hash:1024 in.txt -o db.tq
    run --separate-stderr sh -c 'cat big.tq | tq-simmat -v --topk 2 --db db.tq -o pipe.tq'
    assert_success
    [[ "$stderr" == *"tq-simmat: device auto: cuda:0 (work large: a pipe longer than the read-ahead)"* ]] || fail "$stderr"
    [[ "$stderr" == *"4200 query rows"* ]] || fail "$stderr"
    tq-simmat --device cpu --topk 2 --db db.tq big.tq -o cpu.tq
    cmp pipe.tq cpu.tq
    # the same file as a file: its work, 2 x 4200 x 3 x 1024 flop, counted
    TQ_AUTO_MIN_FLOPS=25804800 device_line tq-simmat --topk 2 --db db.tq big.tq
    [[ "$dline" == *"auto: cuda:0 (work 2.58e+07 flop >= 2.58e+07"* ]] || fail "$dline"
}

@test "auto by each tool's work: tq-embed's hash model is CPU work; tq-attend, tq-train, tq-score" {
    device_line tq-embed -m hash:8 in.txt
    [[ "$dline" == "tq-embed: device auto: cpu (work 0 flop <"* ]] || fail "$dline"
    TQ_AUTO_MIN_FLOPS=1 device_line tq-embed -m hash:8 in.txt
    [[ "$dline" == "tq-embed: device auto: cpu (work 0 flop < 1 (TQ_AUTO_MIN_FLOPS)"* ]] || fail "$dline"
    # attention: 4 x (3 x 8 query values) x 3 keys = 288
    run --separate-stderr sh -c 'TQ_AUTO_MIN_FLOPS=289 tq-attend -v --self < e.tq > a1.tq'
    [[ "$stderr" == *"tq-attend: device auto: cpu (work 288 flop < 289"* ]] || fail "$stderr"
    run --separate-stderr sh -c 'TQ_AUTO_MIN_FLOPS=288 tq-attend -v --self < e.tq > a2.tq'
    [[ "$stderr" == *"tq-attend: device auto: cuda:0 (work 288 flop >= 288"* ]] || fail "$stderr"
    tq-attend --device cpu --self < e.tq > a3.tq
    cmp a1.tq a3.tq
    # a scorer trained and used (samples/train-scorer.sh's steps)
    S="$ROOT_DIR/samples"
    awk -F '\t' '{ printf "{\"group\": %s, \"y\": %s}\n", $1, $2 }' "$S/nbest-train.tsv" |
        tq-cat --from jsonl --dtype i64 > gy.tq
    cut -f3 "$S/nbest-train.tsv" | tq-embed -m hash:64 --batch 1000000 > emb.tq
    tq-cat gy.tq emb.tq > train.tq
    device_line tq-train --model linear --loss listwise --epochs 2 --batch 8 train.tq
    [[ "$dline" == "tq-train: device auto: cpu (work "*" flop < "* ]] || fail "$dline"
    mv out.tq m.tq
    tq-train --device cpu --model linear --loss listwise --epochs 2 --batch 8 -o m-cpu.tq train.tq
    cmp m.tq m-cpu.tq
    device_line tq-score -m m.tq --top 1 train.tq
    [[ "$dline" == "tq-score: device auto: cpu (work "*" flop < "* ]] || fail "$dline"
    TQ_AUTO_MIN_FLOPS=1 device_line tq-score -m m.tq --top 1 train.tq
    [[ "$dline" == "tq-score: device auto: cuda:0 (work "*" flop >= 1 (TQ_AUTO_MIN_FLOPS))" ]] || fail "$dline"
}

@test "ranks: local rank modulo the devices, for auto and a bare cuda or hip; cuda:N kept as given" {
    export TQ_STANDIN_DEVICES=2 TQ_AUTO_MIN_FLOPS=0
    OMPI_COMM_WORLD_LOCAL_RANK=3 device_line tq-simmat --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device auto: cuda:1 (any work: TQ_AUTO_MIN_FLOPS=0; local rank OMPI_COMM_WORLD_LOCAL_RANK=3 mod 2 devices)"
    [[ "$startup" == "tq-simmat: cuda:1: start "* ]] || fail "$startup"
    tq-simmat --device cpu --topk 2 e.tq -o cpu.tq
    cmp out.tq cpu.tq
    OMPI_COMM_WORLD_LOCAL_RANK=3 device_line tq-simmat --device cuda --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device cuda: cuda:1 (local rank OMPI_COMM_WORLD_LOCAL_RANK=3 mod 2 devices)"
    OMPI_COMM_WORLD_LOCAL_RANK=3 device_line tq-simmat --device cuda:0 --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device cuda:0"
    SLURM_LOCALID=4 device_line tq-simmat --device cuda --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device cuda: cuda:0 (local rank SLURM_LOCALID=4 mod 2 devices)"
    MPI_LOCALRANKID=5 device_line tq-simmat --device hip --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device hip: hip:1 (local rank MPI_LOCALRANKID=5 mod 2 devices)"
    # mpirun inside a Slurm job: the launcher's rank, not the batch step's
    SLURM_LOCALID=0 OMPI_COMM_WORLD_LOCAL_RANK=1 device_line tq-simmat --device cuda --topk 2 e.tq
    [[ "$dline" == *"cuda:1 (local rank OMPI_COMM_WORLD_LOCAL_RANK=1 mod 2 devices)" ]] || fail "$dline"
    # no launcher: device 0
    device_line tq-simmat --device cuda --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device cuda: cuda:0"
}

@test "ranks among the visible devices: CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES" {
    export TQ_STANDIN_DEVICES=4 OMPI_COMM_WORLD_LOCAL_RANK=5
    CUDA_VISIBLE_DEVICES=2,0,3 device_line tq-simmat --device cuda --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device cuda: cuda:2 (local rank OMPI_COMM_WORLD_LOCAL_RANK=5 mod 3 devices)"
    # an invalid index hides itself and those after it (CUDA's rule)
    CUDA_VISIBLE_DEVICES=1,7,0 device_line tq-simmat --device cuda --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device cuda: cuda:0 (local rank OMPI_COMM_WORLD_LOCAL_RANK=5 mod 1 device)"
    CUDA_VISIBLE_DEVICES=1,7,0 run -1 tq-simmat --device cuda:1 --topk 2 e.tq -o x.tq
    assert_output --partial "cuda: no device 1 (there is 1)"
    # none visible: --list-devices says so, auto goes on without
    CUDA_VISIBLE_DEVICES= run -0 tq-cat --list-devices
    assert_line --regexp '^cuda +unavailable: cuInit: CUDA_ERROR_NO_DEVICE'
    # HIP: ROCR_VISIBLE_DEVICES first, then HIP_VISIBLE_DEVICES among those
    HIP_VISIBLE_DEVICES=0,1 device_line tq-simmat --device hip --topk 2 e.tq
    assert_equal "$dline" "tq-simmat: device hip: hip:1 (local rank OMPI_COMM_WORLD_LOCAL_RANK=5 mod 2 devices)"
    ROCR_VISIBLE_DEVICES=3,2,1 HIP_VISIBLE_DEVICES=0,1 device_line tq-simmat --device hip --topk 2 e.tq
    [[ "$dline" == *"mod 2 devices)" ]] || fail "$dline"
    ROCR_VISIBLE_DEVICES=3,2,1 device_line tq-simmat --device hip --topk 2 e.tq
    [[ "$dline" == *"hip:2 (local rank OMPI_COMM_WORLD_LOCAL_RANK=5 mod 3 devices)" ]] || fail "$dline"
    CUDA_VISIBLE_DEVICES=0 device_line tq-simmat --device hip --topk 2 e.tq # HIP reads it too
    [[ "$dline" == *"hip:0 (local rank OMPI_COMM_WORLD_LOCAL_RANK=5 mod 1 device)" ]] || fail "$dline"
    tq-simmat --device cpu --topk 2 e.tq -o cpu.tq
    cmp out.tq cpu.tq
}

@test "mpirun -n 3 on a node with 2 devices: ranks 0, 1, 2 take cuda:0, cuda:1, cuda:0" {
    command -v mpirun >/dev/null || skip "Open MPI is not installed (openmpi-bin)"
    open_mpi_env
    export TQ_STANDIN_DEVICES=2 TQ_AUTO_MIN_FLOPS=0
    run --separate-stderr timeout 120 mpirun -n 3 --oversubscribe sh -c \
        'tq-simmat -v --topk 2 e.tq -o r$OMPI_COMM_WORLD_RANK.tq 2>&1 | grep "device auto" | sed "s/^/$OMPI_COMM_WORLD_RANK /"'
    assert_success
    assert_line "0 tq-simmat: device auto: cuda:0 (any work: TQ_AUTO_MIN_FLOPS=0; local rank OMPI_COMM_WORLD_LOCAL_RANK=0 mod 2 devices)"
    assert_line "1 tq-simmat: device auto: cuda:1 (any work: TQ_AUTO_MIN_FLOPS=0; local rank OMPI_COMM_WORLD_LOCAL_RANK=1 mod 2 devices)"
    assert_line "2 tq-simmat: device auto: cuda:0 (any work: TQ_AUTO_MIN_FLOPS=0; local rank OMPI_COMM_WORLD_LOCAL_RANK=2 mod 2 devices)"
    tq-simmat --device cpu --topk 2 e.tq -o cpu.tq
    for r in 0 1 2; do cmp "r$r.tq" cpu.tq; done
}
