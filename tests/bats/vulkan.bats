#!/usr/bin/env bats
# The Vulkan backend through real pipelines: --list-devices, the three ways
# Vulkan can be missing, and tools run with --device vulkan against the same
# tools on the CPU (and the float64 reference where there is one). On this
# project's machines the device is Mesa's lavapipe, a CPU-type Vulkan driver:
# it is only used when named. The op-by-op comparison with float64 references
# is the cross-backend unit suite (tests/unit/test_ops.c).
load helpers
bats_require_minimum_version 1.5.0

built() {
    tq-cat --list-devices | grep -q '^vulkan .*not built' &&
        skip "this build has no Vulkan backend (glslc was missing at build time)"
    return 0
}

# Skips, saying why, when no Vulkan device can be used here.
needs_vulkan() {
    built
    local line
    line=$(tq-cat --list-devices | grep '^vulkan' | head -n 1)
    case "$line" in
    vulkan:*) ;;
    *) skip "no Vulkan device: $(sed "s/^vulkan *unavailable: //" <<< "$line")" ;;
    esac
}

@test "--list-devices: each Vulkan device with index, name, type, driver and memory" {
    needs_vulkan
    run tq-cat --list-devices
    assert_success
    # vulkan:N lines numbered from 0 without gaps
    n=$(grep -c '^vulkan:' <<< "$output")
    for i in $(seq 0 $((n - 1))); do
        grep -q "^vulkan:$i " <<< "$output"
    done
    # every line: a name, then memory, the type, the driver and the Vulkan version
    while read -r l; do
        [[ "$l" =~ ^vulkan:[0-9]+\ +.+,\ [0-9.]+\ (MiB|GiB),\ (discrete\ GPU|integrated\ GPU|virtual\ GPU|CPU|other),\ .+,\ Vulkan\ [0-9]+\.[0-9]+ ]] ||
            fail "malformed line: $l"
    done < <(grep '^vulkan:' <<< "$output")
    # a CPU-type device is marked: auto never takes it
    while read -r l; do
        [[ "$l" == *"(CPU-type device: only by name)"* ]] || fail "CPU-type not marked: $l"
    done < <(grep '^vulkan:.*, CPU, ' <<< "$output")
}

@test "no Vulkan loader: --list-devices says so, --device vulkan fails (exit 1) saying why, auto uses the CPU" {
    built
    export TQ_VULKAN_LOADER=/nonexistent/libvulkan.so.1
    run tq-cat --list-devices
    assert_success
    assert_line --regexp '^vulkan +unavailable: no Vulkan loader \(/nonexistent/libvulkan.so.1: .*\)$'
    assert_line --regexp '^cpu '
    run -1 tq-cat --device vulkan /dev/null
    assert_output --regexp '^tq-cat: error: vulkan: no Vulkan loader'
    run -1 tq-cat --device vulkan:1 /dev/null
    printf 'a b\n' > "$BATS_TEST_TMPDIR/in.txt"
    run tq-embed -v -m hash:8 --device auto -o "$BATS_TEST_TMPDIR/out.tq" "$BATS_TEST_TMPDIR/in.txt"
    assert_success
}

@test "no Vulkan driver: the loader finds no ICD; --list-devices and --device vulkan say so" {
    built
    tq-cat --list-devices | grep -q 'no Vulkan loader' && skip "no Vulkan loader installed here"
    export VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json
    run tq-cat --list-devices
    assert_success
    assert_line --regexp '^vulkan +unavailable: (no Vulkan driver|no device found)'
    run -1 tq-cat --device vulkan /dev/null
    assert_output --regexp 'vulkan: (no Vulkan driver|no device found)'
}

@test "a device index past the last is exit 1 naming how many there are" {
    needs_vulkan
    run -1 tq-cat --device vulkan:99 /dev/null
    assert_output --regexp 'vulkan: no device 99 \(there (is|are) [0-9]+\)'
}

@test "auto never picks a CPU-type Vulkan device" {
    needs_vulkan
    tq-cat --list-devices | grep '^vulkan:' | grep -qv 'CPU-type' &&
        skip "a Vulkan GPU is present: auto may take it"
    printf 'a b\n' > "$BATS_TEST_TMPDIR/in.txt"
    run tq-embed -v -m hash:8 --device auto -o "$BATS_TEST_TMPDIR/out.tq" "$BATS_TEST_TMPDIR/in.txt"
    assert_success
    refute_output --partial 'vulkan:'
}

@test "auto does not load Vulkan on a machine without a GPU device node" {
    built
    compgen -G '/dev/dri/renderD*' > /dev/null || [ -e /dev/nvidiactl ] || [ -e /dev/nvidia0 ] ||
        [ -e /dev/dxg ] && skip "this machine has a GPU device node: auto must look at Vulkan"
    command -v cc > /dev/null || skip "no C compiler to build the marker library"
    # a stand-in loader that leaves a mark when it is loaded, and has no
    # vkGetInstanceProcAddr (so Vulkan is then reported unusable)
    printf '%s\n' '#include <stdio.h>' '#include <stdlib.h>' \
        '__attribute__((constructor)) static void mark(void)' \
        '{ FILE *f = fopen(getenv("TQ_TEST_MARK"), "w"); if (f) fclose(f); }' > "$BATS_TEST_TMPDIR/mark.c"
    cc -shared -fPIC -o "$BATS_TEST_TMPDIR/libmark.so" "$BATS_TEST_TMPDIR/mark.c"
    export TQ_VULKAN_LOADER="$BATS_TEST_TMPDIR/libmark.so" TQ_TEST_MARK="$BATS_TEST_TMPDIR/loaded"
    printf 'a b\n' > "$BATS_TEST_TMPDIR/in.txt"
    run tq-embed -m hash:8 --device auto -o "$BATS_TEST_TMPDIR/out.tq" "$BATS_TEST_TMPDIR/in.txt"
    assert_success
    [ ! -e "$TQ_TEST_MARK" ]
    # the same stand-in is loaded when Vulkan is asked for: the test can fail
    run tq-cat --list-devices
    assert_line --regexp '^vulkan +unavailable: .*has no vkGetInstanceProcAddr'
    [ -e "$TQ_TEST_MARK" ]
}

# tq-embed's tolerance (tq-embed.1): cosine >= 0.99999 with the float64
# reference; the Vulkan encoder runs in f32 like the CPU one, with other
# summation orders, so both sides hold it, and agree with each other as well.
@test "tq-embed -m FOLDER --device vulkan: rows agree with the reference and with --device cpu" {
    needs_vulkan
    VENV_PY="$ROOT_DIR/.venv/bin/python"
    [ -x "$VENV_PY" ] || skip "no .venv (make deps-test makes it): the reference tokenizer is missing"
    "$VENV_PY" -c 'import transformers, torch' 2>/dev/null || skip "transformers or torch missing from .venv"
    "$PY" -c 'import torch' 2>/dev/null || skip "python3-torch is not installed"
    T="$BATS_TEST_TMPDIR"
    py "$TESTS_DIR/lib/make_bert.py" "$T/m" --pool mean --normalize --max-seq 32 --seed 11
    printf '%s\n' "the cat sat on the mat" "Hello world" "café naïve résumé" "中国人 日本語" \
        "a much longer line with many words to fill the sequence up to its limit and past it" > "$T/in.txt"
    "$VENV_PY" "$TESTS_DIR/lib/bert_ref.py" "$T/m" < "$T/in.txt" > "$T/ref.txt" 2>/dev/null
    tq-embed -m "$T/m" --device vulkan --batch 3 "$T/in.txt" | tq-cat -t tsv --name emb |
        tail -n +2 | tr '\t' ' ' > "$T/vk.txt"
    tq-embed -m "$T/m" --device cpu --batch 3 "$T/in.txt" | tq-cat -t tsv --name emb |
        tail -n +2 | tr '\t' ' ' > "$T/cpu.txt"
    [ "$(wc -l < "$T/vk.txt")" -eq 5 ]
    run py "$TESTS_DIR/lib/cosine.py" "$T/ref.txt" "$T/vk.txt" 0.99999
    assert_success
    run py "$TESTS_DIR/lib/cosine.py" "$T/cpu.txt" "$T/vk.txt" 0.99999
    assert_success
}

# tq-attend.1: across devices results agree to about 1e-6 relative; 1e-5 of
# the largest magnitude leaves room for f32 sums in other orders and still
# fails on a wrong mask, scale or weight (those move values by 1e-2 or more).
@test "tq-attend --device vulkan agrees with --device cpu (outputs and consensus)" {
    needs_vulkan
    needs_numpy
    T="$BATS_TEST_TMPDIR"
    py -c "
import numpy as np, tqstream
rng = np.random.default_rng(3)
x = rng.standard_normal((40, 24)).astype(np.float32)
open('$T/in.tq', 'wb').write(tqstream.array_frame('emb', x))"
    for dev in cpu vulkan; do
        tq-attend --device "$dev" --self --heads 2 --consensus < "$T/in.tq" > "$T/$dev.tq"
    done
    run py "$TESTS_DIR/lib/same_frames.py" "$T/cpu.tq" "$T/vulkan.tq" 1e-5
    assert_output "ok"
}

# tq-simmat.1 (DETERMINISM): top-k, threshold and dedup score every pair that
# decides something exactly on the host, whatever the device ranked with, so
# --device vulkan writes the same bytes as --device cpu.
@test "tq-simmat --device vulkan: top-k, threshold and dedup are the CPU's bytes" {
    needs_vulkan
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    simmat_inputs
    for m in cosine dot l2; do
        for k in 5 40; do
            for dev in cpu vulkan; do
                tq-simmat --device "$dev" --db db.tq --metric "$m" -k "$k" < q.tq > "$dev.tq"
            done
            cmp cpu.tq vulkan.tq || fail "-k $k --metric $m differs"
        done
    done
    for a in "cosine 0.5" "l2 -30"; do
        set -- $a
        for dev in cpu vulkan; do
            tq-simmat --device "$dev" --db db.tq --metric "$1" --threshold "$2" < q.tq > "$dev.tq"
        done
        cmp cpu.tq vulkan.tq || fail "--threshold $2 --metric $1 differs"
    done
    for dev in cpu vulkan; do
        tq-simmat --device "$dev" --dedup 0.95 < db.tq > "$dev.tq"
        tq-simmat --device "$dev" --db q.tq --metric l2 --dedup -1 < db.tq > "$dev-db.tq"
    done
    cmp cpu.tq vulkan.tq || fail "--dedup differs"
    cmp cpu-db.tq vulkan-db.tq || fail "--dedup --db differs"
    # the dedup kept the 200 distinct rows
    [ "$(tq-cat --name emb -t tsv < vulkan.tq | tail -n +2 | wc -l)" -eq 200 ]
}

# The full matrix is each device's f32 matrix product (tq-simmat.1: within
# d 2^-24 |q||x| of the exact score; for L2, 2 q.x less the squared norms:
# d 2^-24 (|q| + |x|)^2): the two devices lie within twice that of each other,
# and a wrong operand, row or metric misses it by far.
@test "tq-simmat --device vulkan: the full matrix within the f32 product's bound of the CPU's" {
    needs_vulkan
    needs_numpy
    cd "$BATS_TEST_TMPDIR"
    simmat_inputs
    for m in cosine dot l2; do
        for dev in cpu vulkan; do
            tq-simmat --device "$dev" --db db.tq --metric "$m" < q.tq > "$dev.tq"
        done
        run py -c "
import numpy as np, tqstream as t
def emb(p):
    return np.concatenate([t.to_numpy(f) for f in t.read(open(p, 'rb').read()) if f['name'] == 'emb'])
def sim(p):
    return np.concatenate([t.to_numpy(f) for f in t.read(open(p, 'rb').read()) if f['name'] == 'sim'])
q, x = emb('q.tq').astype(np.float64), emb('db.tq').astype(np.float64)
if '$m' == 'cosine':
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
nq, nx = np.linalg.norm(q, axis=1)[:, None], np.linalg.norm(x, axis=1)[None, :]
size = (nq + nx) ** 2 if '$m' == 'l2' else nq * nx
bound = 2 * q.shape[1] * 2.0 ** -24 * size
a, b = sim('cpu.tq'), sim('vulkan.tq')
assert a.shape == b.shape == (50, 600), (a.shape, b.shape)
err = np.abs(a.astype(np.float64) - b)
assert (err <= bound).all(), ('$m', float((err / bound).max()))
print('ok')"
        assert_output "ok"
    done
}
