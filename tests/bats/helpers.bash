# helpers.bash: what every Bats suite of tq loads first.
# TQ_BIN (set by the Makefile) holds the tools under test.
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

TESTS_DIR="$(cd "$(dirname "${BATS_TEST_FILENAME}")/.." && pwd)"
ROOT_DIR="$(cd "$TESTS_DIR/.." && pwd)"
: "${TQ_BIN:=$ROOT_DIR/bin}"
export PATH="$TQ_BIN:$PATH"
# Debian's python3 with python3-numpy: the independent reference of the tests
# (TQ_TEST_PY names another, for a machine whose python3 lacks them: make
# gpu-check on a GPU machine).
PY=${TQ_TEST_PY:-/usr/bin/python3}
export PYTHONPATH="$TESTS_DIR/lib${PYTHONPATH:+:$PYTHONPATH}"
# Tests must not depend on the caller's environment.
unset TQ_DEVICE TQ_THREADS TQ_LOG TQ_CUDA_DRIVER TQ_CUBLAS TQ_HIP_RUNTIME TQ_ROCBLAS TQ_AUTO_MIN_FLOPS
unset OMPI_COMM_WORLD_LOCAL_RANK MPI_LOCALRANKID MV2_COMM_WORLD_LOCAL_RANK SLURM_LOCALID

# py SCRIPT ARGS...: runs inline Python with the test library on the path.
py() { "$PY" "$@"; }

# needs_numpy: skip with a clear message when the reference is absent.
needs_numpy() {
    "$PY" -c 'import numpy' 2>/dev/null ||
        skip "python3-numpy is not installed (make deps-test installs it)"
}

# needs_torch: the same for PyTorch (tests/lib/make_bert.py writes its models).
needs_torch() {
    "$PY" -c 'import torch' 2>/dev/null ||
        skip "python3-torch is not installed (make deps-test installs it)"
}

# open_mpi_env: what a test that starts Open MPI programs exports. CI runs as
# root, which Open MPI refuses unless told; and Open MPI leaks in its own
# dlopened components, which are gone by exit (LeakSanitizer cannot even name
# them, so no suppression can match): leak checks are off for such tests.
open_mpi_env() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}

# needs_mpi_train: skip unless tq-train was built with MPI (its --help names the
# libmpi it loads under a launcher; it links none, so ldd cannot tell).
needs_mpi_train() {
    "$TQ_BIN/tq-train" --help | grep -q '^MPI: libmpi' ||
        skip "tq-train was built without MPI (mpicc was not found at build time)"
}

# needs_peak_rss: skip a peak-memory test where it cannot be measured: without
# GNU time, or under AddressSanitizer (its shadow memory and quarantine are no
# measure of ours).
needs_peak_rss() {
    [ -x /usr/bin/time ] || skip "/usr/bin/time is not installed"
    case "$TQ_BIN" in */san/*) skip "peak memory is not measured under sanitizers" ;; esac
}

# simmat_inputs: tq-simmat's inputs for the device suites (vulkan.bats,
# gpu.bats): a database of 600 rows of 24 values in batches of 100 with i64 keys, whose rows 200.. repeat its first 8 (each 51 times: more
# than the candidates a device keeps for small k, so those queries take the
# host's way), and 50 queries: every 13th database row (a row against itself:
# L2 +0) and 3 random ones, in two batches.
simmat_inputs() {
    py -c "
import numpy as np, tqstream as t
rng = np.random.default_rng(5)
x = rng.standard_normal((600, 24)).astype(np.float32)
x[200:] = np.tile(x[:8], (50, 1))
q = np.concatenate([x[::13], rng.standard_normal((3, 24)).astype(np.float32)])
db = b''.join(t.array_frame('key', np.arange(b, b + 100, dtype=np.int64)) +
              t.array_frame('emb', x[b:b + 100]) for b in range(0, 600, 100))
open('db.tq', 'wb').write(db)
open('q.tq', 'wb').write(t.array_frame('emb', q[:30]) + t.array_frame('emb', q[30:]))"
}

# all_devices: the devices a run here can open, into $devices, for the tests
# that hold every device to one behaviour: the CPU, Vulkan where a driver is
# installed (lavapipe here), CUDA and HIP on the tests' stand-in driver when
# make standin built it (pointed at it as gpu.bats does), or on a real GPU.
# auto takes the GPU for any work here (TQ_AUTO_MIN_FLOPS=0): the tests' work
# is small, and what they hold auto to is its GPU.
all_devices() {
    export TQ_AUTO_MIN_FLOPS=0
    if [ "${TQ_GPU_REAL:-}" != 1 ] && [ -n "${TQ_STANDIN_LIB:-}" ] && [ -f "$TQ_STANDIN_LIB" ]; then
        export TQ_CUDA_DRIVER="$TQ_STANDIN_LIB" TQ_CUBLAS="$TQ_STANDIN_LIB"
        export TQ_HIP_RUNTIME="$TQ_STANDIN_LIB" TQ_ROCBLAS="$TQ_STANDIN_LIB"
    fi
    devices="cpu $(tq-cat --list-devices | sed -n 's/^\(vulkan\|cuda\|hip\):0 .*/\1/p')"
    echo "devices: $devices"
}

# use_standin_driver: the CUDA and HIP backends on the tests' stand-in driver
# (tests/standin, TQ_STANDIN_LIB), or the test skips saying why.
use_standin_driver() {
    [ -n "${TQ_STANDIN_LIB:-}" ] && [ -f "$TQ_STANDIN_LIB" ] ||
        skip "no stand-in driver (make standin builds it; it needs g++)"
    export TQ_CUDA_DRIVER="$TQ_STANDIN_LIB" TQ_CUBLAS="$TQ_STANDIN_LIB"
    export TQ_HIP_RUNTIME="$TQ_STANDIN_LIB" TQ_ROCBLAS="$TQ_STANDIN_LIB"
}
