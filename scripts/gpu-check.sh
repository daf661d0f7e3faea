#!/usr/bin/env bash
# gpu-check.sh: `make gpu-check`, one command that proves a GPU. The stand-in
# driver of `make check` is only as true as its model of the driver, and a real
# GPU is the judge (ARCHITECTURE.md): wherever a CUDA or HIP device opens, this
# runs every check that needs one and writes build/gpu-check/report.md, with
# each step's log beside it. Without a GPU it says so in one line and exits 0.
#
# Steps (TQ_GPU_CHECK_STEPS, comma- or space-separated, picks some; default all):
#   build      make all, the unit test binaries and the test tools
#   devices    tq-cat --list-devices (and nvidia-smi / rocm-smi where found)
#   ops        the op suite (tests/unit/test_ops.c) on every cuda:N and hip:N,
#              with the BLAS library and with it hidden (own kernels only)
#   check      tq-bench --check on every cuda:N and hip:N
#   bats       tests/bats/gpu.bats on the GPU (TQ_GPU_REAL=1)
#   vulkan     the op suite and tests/bats/vulkan.bats on the GPU's own
#              Vulkan driver, where one is installed (lavapipe left out)
#   sanitizer  compute-sanitizer memcheck, racecheck and synccheck over the op
#              suite on the first CUDA device
#   bench      scripts/bench-gpu.sh, the figures against PyTorch
# Device N is made the process's device 0 by CUDA_VISIBLE_DEVICES or
# HIP_VISIBLE_DEVICES, as test_ops opens device 0; gpu.bats, the sanitizers and
# bench use the first device of each backend. Checks run side by side, at most
# one a core (the op suites and tq-bench --check of every device; then the
# Bats suites, Vulkan and the sanitizers); bench runs alone, last, as its
# figures need a quiet machine. Each step runs under `timeout`, clipped to what
# is left of TQ_GPU_CHECK_BUDGET (540 s) so that the whole stays under ~9
# minutes; bench keeps 150 s of it. A failed or timed-out step does not stop
# the later ones; the exit status is 1 when any failed or timed out, but for a
# sanitizer's timeout, which is reported as such (not as a pass) and is not a
# failure: the sanitizers are time-limited samples of the suite.
#
# TQ_GPU_CHECK_STANDIN=1 points every step at the stand-in driver
# (tests/standin) with small sizes, so that the whole flow can be tried on a
# machine without a GPU; compute-sanitizer is skipped there (it needs a GPU).
# TQ_GPU_CHECK_DIR: where the report and logs go (default build/gpu-check).
# TQ_GPU_CHECK_VULKAN_ICD: the Vulkan driver manifest(s) to use, colon-separated
# (default: every one installed but lavapipe's; naming lavapipe's tries the
# step on the CPU). TQ_BIN: the tools (default bin/; build/san/bin under SAN=1).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
BIN=${TQ_BIN:-$root/bin}
OUT=$(cd "$BIN/.." 2> /dev/null && pwd || echo "$root") # bin/'s parent: the build's root
TESTS=$OUT/build/tests TOOLS=$OUT/build/tools
STANDIN_LIB=${TQ_STANDIN_LIB:-$OUT/build/standin/libtqstandin.so}
standin=${TQ_GPU_CHECK_STANDIN:-0}
dir=${TQ_GPU_CHECK_DIR:-$root/build/gpu-check}
budget=${TQ_GPU_CHECK_BUDGET:-540} bench_reserve=150
ncpu=$(nproc 2> /dev/null || echo 2)
all_steps="build devices ops check bats vulkan sanitizer bench"
steps=$(printf '%s' "${TQ_GPU_CHECK_STEPS:-$all_steps}" | tr ',' ' ')
for s in $steps; do
    case " $all_steps " in *" $s "*) ;; *)
        echo "gpu-check: error: unknown step '$s' in TQ_GPU_CHECK_STEPS (steps: $all_steps)" >&2
        exit 2 ;;
    esac
done
wanted() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
# the make of this script's caller (make gpu-check) must not hand its jobserver on
unset MAKEFLAGS MFLAGS MAKELEVEL
san=""
[ "$OUT" = "$root/build/san" ] && san=SAN=1
prefix=${OUT#"$root"} prefix=${prefix#/} prefix=${prefix:+$prefix/}

# ---- which driver: the stand-in, or the machine's own ----
if [ "$standin" = 1 ]; then
    export TQ_CUDA_DRIVER="$STANDIN_LIB" TQ_CUBLAS="$STANDIN_LIB"
    export TQ_HIP_RUNTIME="$STANDIN_LIB" TQ_ROCBLAS="$STANDIN_LIB"
    # its kernels run on the CPU: GPU sizes would take hours (tq-bench's
    # ceilings at CPU-type sizes; bench-gpu.sh's figures tiny)
    export TQ_BENCH_SMALL=1 TQ_BENCH_GPU_N=${TQ_BENCH_GPU_N:-256} TQ_BENCH_GPU_Q=${TQ_BENCH_GPU_Q:-200}
    export TQ_BENCH_GPU_DB=${TQ_BENCH_GPU_DB:-5000} TQ_BENCH_GPU_ATT=${TQ_BENCH_GPU_ATT:-256}
    export TQ_BENCH_GPU_SENTENCES=${TQ_BENCH_GPU_SENTENCES:-4}
else
    # a variable left pointing at the stand-in would make a CPU look like a GPU
    for v in TQ_CUDA_DRIVER TQ_CUBLAS TQ_HIP_RUNTIME TQ_ROCBLAS; do
        case "${!v:-}" in *libtqstandin*) unset "$v" ;; esac
    done
fi

now_ms() { # EPOCHREALTIME: bash 5; date's %N otherwise
    local t=${EPOCHREALTIME//[.,]/}
    [ -n "$t" ] || t=$(date +%s%6N)
    echo $((t / 1000))
}
t_start=$(now_ms)
deadline=$((t_start / 1000 + budget))

# ---- has this machine a GPU? (built quietly first if the tools are missing) ----
build_targets() {
    local f t="all"
    for f in tests/unit/*.c; do f=${f##*/}; t="$t ${prefix}build/tests/${f%.c}"; done
    for f in tests/tools/*.c; do f=${f##*/}; t="$t ${prefix}build/tools/${f%.c}"; done
    [ "$standin" = 1 ] && t="$t ${prefix}build/standin/libtqstandin.so"
    echo "$t"
}
if [ ! -x "$BIN/tq-cat" ] || { [ "$standin" = 1 ] && [ ! -f "$STANDIN_LIB" ]; }; then
    log=$(mktemp "${TMPDIR:-/tmp}/tq-gpu-check-build.XXXXXX")
    # shellcheck disable=SC2046 # the targets are words
    make -j"$ncpu" $san $(build_targets) > "$log" 2>&1 ||
        { echo "gpu-check: error: the build failed (its output: $log)"; exit 1; }
    rm -f "$log"
fi
list=$("$BIN/tq-cat" --list-devices 2>&1) ||
    { echo "gpu-check: error: tq-cat --list-devices failed: $(tail -n 1 <<< "$list")"; exit 1; }
devs=$(awk '$1 ~ /^(cuda|hip):[0-9]+$/ { print $1 }' <<< "$list")
if [ -z "$devs" ]; then
    why=$(awk '$1 == "cuda" || $1 == "hip"' <<< "$list" | sed 's/  */ /; s/ unavailable//' | paste -sd ';' | sed 's/;/; /g')
    echo "gpu-check: no CUDA or HIP GPU here (${why:-neither backend is built}): nothing to check"
    exit 0
fi

mkdir -p "$dir" || exit 1
rm -f "$dir"/*.log "$dir"/.*.rc "$dir/report.md"

# ---- steps: each in the background under timeout, its log in $dir ----
# R_*: one entry a step, in the order they were started
R_NAME=() R_LABEL=() R_KIND=() R_CAP=() R_STATUS=() R_COUNTS=() R_SECS=() R_NOTE=()
running=()

# cap_for CAP: CAP clipped to the time left (less bench's share until bench runs)
cap_for() {
    local left=$((deadline - $(now_ms) / 1000))
    wanted bench && [ "${bench_done:-0}" = 0 ] && left=$((left - bench_reserve))
    [ "$1" -lt "$left" ] && left=$1
    echo "$left"
}

# start NAME KIND CAP LABEL CMD...: runs CMD (no shell functions: it goes
# through timeout) with its output in NAME.log; KIND says how to read the log.
start() {
    local name=$1 kind=$2 cap=$3 label=$4 i=${#R_NAME[@]}
    shift 4
    R_NAME+=("$name") R_LABEL+=("$label") R_KIND+=("$kind") R_STATUS+=("") R_COUNTS+=("")
    R_SECS+=("") R_NOTE+=("")
    # at most a step a core: the stand-in runs a process's kernels on one
    while [ "$(jobs -rp | wc -l)" -ge "$ncpu" ]; do wait -n; done
    cap=$(cap_for "$cap")
    R_CAP+=("$cap")
    if [ "$cap" -lt 10 ]; then
        R_STATUS[i]="not run" R_NOTE[i]="the time budget (${budget} s) was spent"
        echo "gpu-check: $label: not run: ${R_NOTE[i]}"
        return
    fi
    (
        t0=$(now_ms)
        timeout -k 10 "$cap" "$@" < /dev/null > "$dir/$name.log" 2>&1
        echo "$? $(($(now_ms) - t0))" > "$dir/.$name.rc"
    ) &
    running+=("$i")
}

# skip NAME LABEL WHY: a step that cannot run here, and why (not a failure)
skip() {
    R_NAME+=("$1") R_LABEL+=("$2") R_KIND+=(none) R_CAP+=(0) R_STATUS+=(skipped)
    R_COUNTS+=("") R_SECS+=("") R_NOTE+=("$3")
    echo "gpu-check: $2: skipped: $3"
}

# counts_of LOG: "P F" from the last "N passed, N failed" line, or nothing
counts_of() { sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$1" | tail -n 1; }

# judge I RC: the status, counts and note of step I from its exit status and log
judge() {
    local i=$1 rc=$2 log=$dir/${R_NAME[$1]}.log st=pass counts="" note="" p f e
    case "${R_KIND[i]}" in
    ops | san)
        read -r p f <<< "$(counts_of "$log")"
        if [ -n "${p:-}" ]; then counts="$p passed, $f failed"; fi
        if ! grep -q '^ok device ' "$log"; then
            st=FAIL note="the device did not open: $(sed -n 's/^ok skip //p' "$log" | head -n 1)"
        elif [ -z "${p:-}" ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]; then
            st=FAIL note="no 'N passed, N failed' line: it crashed or exited $rc"
        elif [ "${f:-0}" != 0 ]; then
            st=FAIL
        fi
        if [ "${R_KIND[i]}" = san ]; then
            e=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log" | tail -n 1)
            if [ -n "$e" ]; then
                counts="${counts:+$counts; }$e sanitizer errors"
                [ "$e" = 0 ] || st=FAIL
            fi
        fi
        ;;
    bats)
        counts=$(sed -n 's/^bats: //p' "$log" | tail -n 1)
        f=$(sed -n 's/^bats: [0-9]* passed, \([0-9]*\) failed.*/\1/p' "$log" | tail -n 1)
        [ "${f:-1}" = 0 ] || st=FAIL
        # every test skipped proves nothing: the device was not found there
        [ "$(sed -n 's/^bats: \([0-9]*\) passed.*/\1/p' "$log" | tail -n 1)" != 0 ] ||
            { st=FAIL note="no test ran: every one skipped, see the log"; }
        ;;
    check)
        p=$(grep -c ' ok: ' "$log") f=$(grep -cE ' (MISMATCH|FAILED): ' "$log")
        counts="$p passed, $f failed"
        [ "$f" = 0 ] && [ "$p" -gt 0 ] || st=FAIL
        ;;
    bench)
        counts="$(grep -cE '^GPU [^ ]+ (GEMM|top-10|dedup|attention|BERT) ' "$log") figures, $(grep -E '^bench: .* not measured: ' "$log" | grep -cvE '^bench: [0-9]+ peer') peers not measured"
        ;;
    esac
    [ "$rc" = 0 ] || [ "$st" = FAIL ] || { st=FAIL; note=${note:-exited $rc}; }
    if [ "$st" = FAIL ] && [ -z "$note" ]; then # the first failure, for the table
        e=$(grep -m 1 -E '^FAIL |^not ok | (MISMATCH|FAILED): |^========= +(Invalid|Race|Barrier)' "$log")
        [ -z "$e" ] || note="first: $(sed 's/  */ /g' <<< "$e" | cut -c 1-160)"
    fi
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        st=TIMEOUT note="stopped after ${R_CAP[i]} s"
        if [ "${R_KIND[i]}" = san ]; then
            e=$(grep -cE '^========= +(Invalid|Race|Barrier|.*[Hh]azard|Error:)' "$log")
            note="$note: not a pass; $e sanitizer reports in the part that ran"
            [ "$e" = 0 ] || st=FAIL
        fi
    fi
    R_STATUS[i]=$st R_COUNTS[i]=$counts
    [ -z "$note" ] || R_NOTE[i]=${note//|/\\|}
}

# finish: waits for every running step, judges it, says it in one line
finish() {
    wait
    local i rc ms
    for i in "${running[@]}"; do
        read -r rc ms < "$dir/.${R_NAME[i]}.rc"
        rm -f "$dir/.${R_NAME[i]}.rc"
        R_SECS[i]=$(((ms + 500) / 1000))
        judge "$i" "$rc"
        echo "gpu-check: ${R_LABEL[i]}: ${R_STATUS[i]}${R_COUNTS[i]:+, ${R_COUNTS[i]}}${R_NOTE[i]:+ (${R_NOTE[i]})}, ${R_SECS[i]} s"
    done
    running=()
    report
}

# visible BACKEND N: CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES=... that makes
# device N the process's device 0 (test_ops and the Bats suites open device 0),
# within what the caller's own setting already selects
visible() {
    local var=CUDA_VISIBLE_DEVICES sel
    [ "$1" = hip ] && var=HIP_VISIBLE_DEVICES
    sel=$2
    [ -z "${!var:-}" ] || sel=$(cut -d, -f$(($2 + 1)) <<< "${!var}")
    echo "$var=$sel"
}

# vk_icds: the Vulkan drivers to try, colon-separated (see the top)
vk_icds() {
    if [ -n "${TQ_GPU_CHECK_VULKAN_ICD:-}" ]; then
        echo "$TQ_GPU_CHECK_VULKAN_ICD"
        return
    fi
    local d f l=""
    for d in /etc/vulkan/icd.d /usr/share/vulkan/icd.d /usr/local/etc/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
        for f in "$d"/*.json; do
            [ -f "$f" ] || continue
            grep -q 'lvp' "$f" && continue # lavapipe: libvulkan_lvp.so
            l=$l${l:+:}$f
        done
    done
    echo "$l"
}

py_has() { [ -x "$1" ] && "$1" -c "import $2" 2> /dev/null; }

# The Bats suites' reference Python (helpers.bash's TQ_TEST_PY): Debian's when
# it has NumPy, else the first that has (the first GPU machine's had none).
test_py=/usr/bin/python3
for p in /usr/bin/python3 "$root/.venv/bin/python" "$(command -v python3)"; do
    py_has "$p" numpy && { test_py=$p; break; }
done
export TQ_TEST_PY=$test_py

# ---- the report: rewritten after each phase, so a killed run leaves one ----
report() {
    local i tot=$((($(now_ms) - t_start + 500) / 1000)) r=$dir/report.md
    {
        echo "# make gpu-check"
        echo
        echo "- when: $(date -u '+%Y-%m-%d %H:%M UTC'), on $(uname -n), commit $(git rev-parse --short=12 HEAD 2> /dev/null)$(git diff --quiet HEAD -- 2> /dev/null || echo -dirty)"
        if [ "$standin" = 1 ]; then
            echo "- mode: **stand-in driver** (TQ_GPU_CHECK_STANDIN=1, $STANDIN_LIB): the CUDA and HIP"
            echo "  kernels ran on this CPU, at small sizes; this proves the flow, not a GPU"
        else
            echo "- mode: the machine's own GPU drivers"
        fi
        echo "- GPU devices: $(paste -sd ' ' <<< "$devs")"
        echo "- result: $(summary), $tot s in all (budget $budget s)"
        echo
        echo "| step | result | counts | time | log |"
        echo "|---|---|---|---|---|"
        for i in "${!R_NAME[@]}"; do
            local log="-"
            [ -f "$dir/${R_NAME[i]}.log" ] && log="[${R_NAME[i]}.log](${R_NAME[i]}.log)"
            echo "| ${R_LABEL[i]} | ${R_STATUS[i]:-running}${R_NOTE[i]:+: ${R_NOTE[i]}} | ${R_COUNTS[i]} | ${R_SECS[i]:+${R_SECS[i]} s} | $log |"
        done
        echo
        echo "Steps ran side by side, one a core (the op suites and checks; then the Bats suites,"
        echo "Vulkan and the sanitizers), bench-gpu.sh alone, last: the times overlap."
        local not=""
        for i in $all_steps; do wanted "$i" || not="$not $i"; done
        [ -z "$not" ] || printf '\nNot asked for (TQ_GPU_CHECK_STEPS):%s.\n' "$not"
        echo
        echo '## Devices (`tq-cat --list-devices`)'
        echo
        echo '```'
        echo "$list"
        echo '```'
        if [ -s "$dir/bench.log" ]; then
            echo
            echo '## Figures (`scripts/bench-gpu.sh`, against PyTorch on the same GPU)'
            echo
            echo '```'
            grep -E '^(GPU |bench: )' "$dir/bench.log"
            echo '```'
        fi
        echo
        echo "## Python"
        echo
        pythons
    } > "$r.tmp" && mv "$r.tmp" "$r"
}

# pythons: which Python each step used, and what it lacked (/usr/bin/python3
# had no NumPy on the first GPU machine)
pythons() {
    local p=${TQ_BENCH_GPU_PY:-$root/.venv-bench/bin/python} v
    v=$("$test_py" -c 'import numpy; print("NumPy " + numpy.__version__)' 2> /dev/null || echo "no NumPy: their tests that need it skip")
    py_has "$test_py" torch || v="$v; no PyTorch: the tests that make a BERT folder skip"
    echo "- Bats suites: their references run under $test_py (TQ_TEST_PY, tests/bats/helpers.bash): $v"
    if py_has "$root/.venv/bin/python" 'transformers, torch'; then
        echo "- the tokenizer references of gpu.bats and vulkan.bats: $root/.venv/bin/python"
    else
        echo "- the tokenizer references of gpu.bats and vulkan.bats: skipped (no .venv with transformers and torch: make deps-test)"
    fi
    if py_has "$p" torch; then
        echo "- bench-gpu.sh's PyTorch peers: $p"
    else
        echo "- bench-gpu.sh's PyTorch peers: not measured ($p has no PyTorch, or does not exist: scripts/venv-bench.sh)"
    fi
    v=$(sed -n 's/^GPU NumPy: the BERT cosines by //p' "$dir/bench.log" 2> /dev/null | head -n 1)
    [ -z "$v" ] || echo "- bench-gpu.sh's BERT cosines: $v"
    echo "- bench-gpu.sh's csv parsing and arithmetic: /usr/bin/python3 (standard library only)"
}

summary() {
    local i p=0 f=0 t=0 s=0
    for i in "${!R_STATUS[@]}"; do
        case "${R_STATUS[i]}" in
        pass) p=$((p + 1)) ;; FAIL) f=$((f + 1)) ;; TIMEOUT) t=$((t + 1)) ;; *) s=$((s + 1)) ;;
        esac
    done
    echo "$p passed, $f failed, $t timed out, $s skipped or not run"
}

echo "gpu-check: GPU devices $(paste -sd ' ' <<< "$devs")$([ "$standin" = 1 ] && echo " (the stand-in driver)"); logs and report in ${dir#"$root"/}/"

# ---- build, devices ----
if wanted build; then
    # shellcheck disable=SC2046
    start build plain 300 "build (make all, unit tests, test tools)" make -j"$ncpu" $san $(build_targets)
    finish
fi
if wanted devices; then
    start devices plain 30 "devices" bash -c '"$1" --list-devices; for t in "nvidia-smi -L" "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv" "rocm-smi --showproductname"; do
        command -v "${t%% *}" > /dev/null && { echo "\$ $t"; $t; }; done; true' - "$BIN/tq-cat"
    finish
fi

# ---- the op suite with and without BLAS, and tq-bench --check, every device ----
for dev in $devs; do
    b=${dev%%:*} n=${dev#*:} blas=cuBLAS
    [ "$b" = hip ] && blas=rocBLAS
    vis=$(visible "$b" "$n")
    if wanted ops; then
        start "ops-$b$n-blas" ops 180 "op suite $dev, $blas" \
            env TQ_TEST_DEVICES="$b" "$vis" "$TESTS/test_ops"
        start "ops-$b$n-noblas" ops 180 "op suite $dev, $blas hidden (own kernels)" \
            env TQ_TEST_DEVICES="$b" "$vis" TQ_CUBLAS=/nonexistent/libcublas-hidden.so \
            TQ_ROCBLAS=/nonexistent/librocblas-hidden.so "$TESTS/test_ops"
    fi
    if wanted check; then
        start "check-$b$n" check 90 "tq-bench --check $dev" "$BIN/tq-bench" --check --device "$dev" --progress never
    fi
done
finish

# ---- side by side: the Bats suite, Vulkan, the sanitizers ----
if wanted bats; then
    if [ "$standin" = 1 ]; then # gpu.bats' own stand-in set-up
        start bats-gpu bats 240 "gpu.bats (stand-in)" env TQ_BIN="$BIN" TQ_TEST_TOOLS="$TOOLS" \
            TQ_STANDIN_LIB="$STANDIN_LIB" sh tests/run-bats.sh tests/bats/gpu.bats
    else
        start bats-gpu bats 240 "gpu.bats (TQ_GPU_REAL=1)" env TQ_BIN="$BIN" TQ_TEST_TOOLS="$TOOLS" \
            TQ_GPU_REAL=1 sh tests/run-bats.sh tests/bats/gpu.bats
    fi
fi
if wanted vulkan; then
    icds=$(vk_icds)
    vk=$(VK_DRIVER_FILES=$icds VK_ICD_FILENAMES=$icds "$BIN/tq-cat" --list-devices | grep '^vulkan')
    icd_names=$(tr ':' '\n' <<< "$icds" | sed 's|.*/||; s|\.json$||' | paste -sd ' ')
    if [ -z "$icds" ]; then
        skip vulkan "Vulkan" "no Vulkan driver installed but lavapipe"
    elif ! grep -q '^vulkan:0 ' <<< "$vk"; then
        skip vulkan "Vulkan" "no device through $icd_names ($(sed 's/^vulkan *//; s/^unavailable: //' <<< "$vk" | head -n 1))"
    elif grep -q '^vulkan:0 .*, CPU, ' <<< "$vk" && [ -z "${TQ_GPU_CHECK_VULKAN_ICD:-}" ]; then
        skip vulkan "Vulkan" "only a CPU-type device through $icd_names"
    else
        # the loader sees only these drivers: vulkan:0 is the GPU, as the
        # suites (which open vulkan:0) need
        vkenv=(env VK_DRIVER_FILES="$icds" VK_ICD_FILENAMES="$icds")
        name=$(sed -n 's/^vulkan:0 *\(.*\), [0-9.]* [KMGT]iB, .*/\1/p' <<< "$vk" | head -n 1)
        name=${name% (CPU-type device: only by name)}
        start vulkan-ops ops 180 "Vulkan op suite, vulkan:0 = $name" \
            "${vkenv[@]}" TQ_TEST_DEVICES=vulkan "$TESTS/test_ops"
        start vulkan-bats bats 180 "vulkan.bats, vulkan:0 = $name" \
            "${vkenv[@]}" TQ_BIN="$BIN" TQ_TEST_TOOLS="$TOOLS" sh tests/run-bats.sh tests/bats/vulkan.bats
    fi
fi
if wanted sanitizer; then
    cs=$(command -v compute-sanitizer || { [ -x /usr/local/cuda/bin/compute-sanitizer ] && echo /usr/local/cuda/bin/compute-sanitizer; })
    cudev=$(grep '^cuda:' <<< "$devs" | head -n 1)
    if [ "$standin" = 1 ]; then
        skip sanitizer "compute-sanitizer" "it needs a GPU, and this run is on the stand-in driver"
    elif [ -z "$cudev" ]; then
        skip sanitizer "compute-sanitizer" "no CUDA device (it checks CUDA only)"
    elif [ -z "$cs" ]; then
        skip sanitizer "compute-sanitizer" "not found on the PATH or in /usr/local/cuda/bin"
    else
        # cuBLAS hidden: the sanitizers judge our kernels (our own matmul
        # included), not NVIDIA's library; the three run side by side
        for tool in memcheck racecheck synccheck; do
            start "$tool" san 240 "compute-sanitizer $tool, op suite $cudev (cuBLAS hidden)" \
                env TQ_TEST_DEVICES=cuda "$(visible cuda "${cudev#cuda:}")" \
                TQ_CUBLAS=/nonexistent/libcublas-hidden.so \
                "$cs" --tool "$tool" --error-exitcode 86 "$TESTS/test_ops"
        done
    fi
fi
finish

# ---- bench-gpu.sh, alone: the first device of each backend ----
if wanted bench; then
    bench_done=1
    first=$(awk -F: '!seen[$1]++' <<< "$devs" | paste -sd ,)
    start bench bench 240 "bench-gpu.sh on ${TQ_BENCH_GPU_DEVICES:-$first}" \
        env TQ_BENCH_GPU_DEVICES="${TQ_BENCH_GPU_DEVICES:-$first}" bash scripts/bench-gpu.sh "$BIN"
    finish
fi

echo "gpu-check: $(summary); report: ${dir#"$root"/}/report.md"
for i in "${!R_STATUS[@]}"; do
    case "${R_STATUS[i]}" in
    FAIL) exit 1 ;;
    TIMEOUT | "not run") [ "${R_KIND[i]}" = san ] || exit 1 ;;
    esac
done
exit 0
