#!/usr/bin/env bats
# make gpu-check (scripts/gpu-check.sh): without a GPU, one line and exit 0;
# on the stand-in driver (TQ_GPU_CHECK_STANDIN=1), two of its quick steps, as
# the whole takes minutes there: the report lists each with the counts of its
# log, and a failed step fails the run without stopping the steps after it.
load helpers
bats_require_minimum_version 1.5.0

@test "without a GPU: one line saying so and why, exit 0, nothing written" {
    run --separate-stderr env TQ_CUDA_DRIVER=/nonexistent/libcuda.so.1 \
        TQ_HIP_RUNTIME=/nonexistent/libamdhip64.so TQ_BIN="$TQ_BIN" \
        TQ_GPU_CHECK_DIR="$BATS_TEST_TMPDIR/gc" bash "$ROOT_DIR/scripts/gpu-check.sh"
    assert_success
    [ "${#lines[@]}" -eq 1 ] || fail "not one line: $output"
    assert_output --regexp '^gpu-check: no CUDA or HIP GPU here \(cuda.*; hip.*\): nothing to check$'
    [ -z "$stderr" ]
    [ ! -e "$BATS_TEST_TMPDIR/gc" ]
}

@test "stand-in: tq-bench --check on cuda:0 and hip:0, one perturbed: the report's counts are the logs', the run fails" {
    [ -n "${TQ_STANDIN_LIB:-}" ] && [ -f "$TQ_STANDIN_LIB" ] ||
        skip "no stand-in driver (TQ_STANDIN_LIB; see tests/bats/gpu.bats)"
    D="$BATS_TEST_TMPDIR/gc"
    ran=$(TQ_CUDA_DRIVER="$TQ_STANDIN_LIB" TQ_HIP_RUNTIME="$TQ_STANDIN_LIB" tq-cat --list-devices |
        awk '$1 ~ /^(cuda|hip):0$/ { print $1 }' | paste -sd ' ')
    [ -n "$ran" ] || skip "this build has neither CUDA nor HIP"
    bad_dev=${ran%% *} # its matmul gets one wrong value
    run env TQ_GPU_CHECK_STANDIN=1 TQ_GPU_CHECK_STEPS=devices,check,sanitizer TQ_BIN="$TQ_BIN" \
        TQ_STANDIN_LIB="$TQ_STANDIN_LIB" TQ_GPU_CHECK_DIR="$D" TQ_BENCH_PERTURB="matmul:$bad_dev" \
        timeout 60 bash "$ROOT_DIR/scripts/gpu-check.sh"
    assert_failure 1
    grep -qx -- "- GPU devices: $ran" "$D/report.md" || fail "not $ran in: $(cat "$D/report.md")"
    assert_line --regexp '^gpu-check: devices: pass, [0-9]+ s$'
    assert_line --regexp '^gpu-check: compute-sanitizer: skipped: .*stand-in'
    for dev in $ran; do
        log="$D/check-${dev/:/}.log"
        [ -s "$log" ] || fail "no $log"
        ok=$(grep -c ' ok: ' "$log" || true) bad=$(grep -cE ' (MISMATCH|FAILED): ' "$log" || true)
        [ "$ok" -gt 20 ]
        want=pass
        [ "$dev" != "$bad_dev" ] || { want=FAIL && [ "$bad" -eq 1 ]; }
        [ "$dev" = "$bad_dev" ] || [ "$bad" -eq 0 ]
        assert_line --regexp "^gpu-check: tq-bench --check $dev: $want, $ok passed, $bad failed"
        grep -qE "^\| tq-bench --check $dev \| $want(: [^|]*)? \| $ok passed, $bad failed \| " "$D/report.md" ||
            fail "no row for $dev in: $(cat "$D/report.md")"
    done
    grep -qE '^\| compute-sanitizer \| skipped: .*\| - \|$' "$D/report.md"
    grep -q '^Not asked for (TQ_GPU_CHECK_STEPS): build ops bats vulkan bench\.$' "$D/report.md"
    # devices and every check but the perturbed one passed
    assert_line --regexp "^gpu-check: $(wc -w <<< "$ran") passed, 1 failed, 0 timed out, 1 skipped or not run; report: "
}
