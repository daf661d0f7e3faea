# tq: one entry point. `make` builds lib/libtq.a and bin/tq-*; `make check` runs
# every test; `make demo` runs a sample pipeline; `make bench` measures against
# the peers; `make gpu-check` proves a GPU; `make install PREFIX=...` installs.
# `make SAN=1 ...` builds and tests under AddressSanitizer and
# UndefinedBehaviorSanitizer in build/san/.

PREFIX  ?= /usr/local
CC      ?= cc
VERSION := $(shell sed -n 's/^#define TQ_VERSION "\(.*\)"/\1/p' lib/tq.h)

ifeq ($(SAN),1)
OUT      := build/san
SANFLAGS := -fsanitize=address,undefined
OPT      := -O1 -g -fno-omit-frame-pointer $(SANFLAGS) -fno-sanitize-recover=undefined
else
OUT      := .
OPT      := -O2 -g
endif
OBJDIR   := $(if $(filter .,$(OUT)),build/obj,$(OUT)/obj)
LIBA     := $(OUT)/lib/libtq.a
BINDIR   := $(OUT)/bin

WARN     := -Wall -Wextra -Werror
CPPFLAGS += -D_GNU_SOURCE -Ilib
CFLAGS   += -std=c11 $(OPT) $(WARN) -pthread -MMD -MP
LDLIBS   += -lz -ldl -lm -pthread
LDFLAGS  += $(SANFLAGS)

# ---- optional backends: each one needs its toolchain and its sources ----
# A missing toolchain leaves the backend out with one line of explanation; it
# never yields a backend that would fail at run time.
HAVE_GLSLC := $(shell command -v glslc >/dev/null 2>&1 && echo 1)
HAVE_NVCC  := $(shell command -v nvcc >/dev/null 2>&1 || test -x /usr/local/cuda/bin/nvcc && echo 1)
HAVE_HIPCC := $(shell command -v hipcc >/dev/null 2>&1 && echo 1)
VULKAN_SRC := $(wildcard lib/vulkan/*.c)
CUDA_SRC   := $(wildcard lib/cuda/*.c)
BACKEND_NOTES :=
ifeq ($(VULKAN_SRC),)
BACKEND_NOTES += "vulkan: left out (this tree has no Vulkan backend yet)"
else ifneq ($(HAVE_GLSLC),1)
BACKEND_NOTES += "vulkan: left out (glslc not found: apt-get install glslc)"
VULKAN_SRC :=
endif
# CUDA and HIP: one host source (lib/cuda/, built twice) and one kernel source
# (kernels/cuda/*.cu), compiled by nvcc into a fatbin and by hipcc into a code
# object bundle, both embedded in libtq.a (and left in build/cuda, build/hip).
CUDA_KERNELS := $(wildcard kernels/cuda/*.cu)
GPU_OBJ  :=
ifeq ($(CUDA_SRC)$(CUDA_KERNELS),)
BACKEND_NOTES += "cuda: left out (this tree has no CUDA backend yet)"
BACKEND_NOTES += "hip: left out (this tree has no HIP backend yet)"
else
ifeq ($(HAVE_NVCC),1)
CPPFLAGS += -DTQ_HAVE_CUDA
GPU_OBJ  += $(CUDA_SRC:%.c=$(OBJDIR)/%.cuda.o) $(OBJDIR)/kernels/cuda/image_cuda.o
else
BACKEND_NOTES += "cuda: left out (nvcc not found on PATH or in /usr/local/cuda/bin: install the CUDA toolkit)"
endif
ifeq ($(HAVE_HIPCC),1)
CPPFLAGS += -DTQ_HAVE_HIP
GPU_OBJ  += $(CUDA_SRC:%.c=$(OBJDIR)/%.hip.o) $(OBJDIR)/kernels/cuda/image_hip.o
else
BACKEND_NOTES += "hip: left out (hipcc not found: apt-get install hipcc)"
endif
endif

LIB_SRC  := $(filter-out lib/vulkan/% lib/cuda/%,$(wildcard lib/*.c lib/*/*.c)) $(VULKAN_SRC)
LIB_OBJ  := $(LIB_SRC:%.c=$(OBJDIR)/%.o)
# Vulkan: the shaders of kernels/vulkan/ compiled to SPIR-V and embedded in
# libtq.a as C arrays (one generated file, rebuilt when any shader changes).
ifneq ($(VULKAN_SRC),)
CPPFLAGS += -DTQ_HAVE_VULKAN
VK_SHADERS := $(OBJDIR)/kernels/vulkan/shaders.c
LIB_OBJ  += $(VK_SHADERS:.c=.o)
endif
LIB_OBJ  += $(GPU_OBJ)
TOOLS    := $(patsubst cmd/%.c,%,$(wildcard cmd/tq-*.c))
BINS     := $(TOOLS:%=$(BINDIR)/%)
UNIT_SRC := $(wildcard tests/unit/*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(OUT)/build/tests/%)
# small programs the Bats suites drive the library with (no tool exposes yet)
TTOOL_SRC := $(wildcard tests/tools/*.c)
TTOOL_BIN := $(TTOOL_SRC:tests/tools/%.c=$(OUT)/build/tools/%)
# the host fault shim of the Bats suites (tests/faults/)
FAULT_SHIM := $(OUT)/build/faults/libtqhostfault.so

.SECONDARY:
.PHONY: FORCE all deps deps-test deps-demo check check-unit check-bats check-fuzz check-man demo bench gpu-check install clean notes
all: notes $(LIBA) $(BINS)

notes:
	@for n in $(BACKEND_NOTES); do echo "note: $$n"; done

# Every object depends on the flags it was compiled with: when a backend comes
# or goes (glslc installed, say), -DTQ_HAVE_* changes and the library must be
# rebuilt whole, not half with the old flags. The stamp changes only then.
FLAGS_STAMP := $(OBJDIR)/flags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(CPPFLAGS) $(CFLAGS)' | cmp -s - $@ || echo '$(CC) $(CPPFLAGS) $(CFLAGS)' > $@
FORCE:

$(OBJDIR)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# tq-bench's report names the commit and flags it was built from: baked into
# context.o, rebuilt when the commit changes (the stamp changes only then).
GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
COMMIT_STAMP := $(OBJDIR)/commit
$(COMMIT_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(GIT_COMMIT)' | cmp -s - $@ || echo '$(GIT_COMMIT)' > $@
$(OBJDIR)/lib/bench/context.o: $(COMMIT_STAMP)
$(OBJDIR)/lib/bench/context.o: CPPFLAGS += -DTQ_BUILD_COMMIT='"$(GIT_COMMIT)"' -DTQ_BUILD_FLAGS='"$(OPT)"'

# f16/bf16 and CPU kernels are hot loops: let the compiler vectorize them.
$(OBJDIR)/lib/stream/dtype.o $(OBJDIR)/lib/cpu/%.o: OPT += $(if $(filter 1,$(SAN)),,-O3)
# tq-train's optimizer updates every parameter each step, and its loss takes
# an exp of every output: vectorized too (sqrt vectorizes only without errno,
# which nothing there reads); lbfgs.c's objective is rows times weights,
# element-wise over the outputs (no sum reordered: the same bits), its
# products in linprod*.c.
$(OBJDIR)/lib/train/optim.o $(OBJDIR)/lib/train/loss.o $(OBJDIR)/lib/train/lbfgs.o \
    $(OBJDIR)/lib/train/linprod.o $(OBJDIR)/lib/train/linprod_avx2.o: OPT += $(if $(filter 1,$(SAN)),,-O3 -fno-math-errno)

$(VK_SHADERS): kernels/vulkan/shaders.txt $(wildcard kernels/vulkan/*.comp kernels/vulkan/*.glsl) scripts/vk-shaders.sh
	@mkdir -p $(dir $@)
	sh scripts/vk-shaders.sh kernels/vulkan/shaders.txt $@

$(VK_SHADERS:.c=.o): $(VK_SHADERS) $(FLAGS_STAMP)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

build/cuda/tq.fatbin: $(CUDA_KERNELS) $(wildcard kernels/cuda/*.h kernels/cuda/*.cuh) scripts/gpu-kernels.sh
	sh scripts/gpu-kernels.sh cuda $@ $(CUDA_KERNELS)

build/hip/tq.hipfb: $(CUDA_KERNELS) $(wildcard kernels/cuda/*.h kernels/cuda/*.cuh) scripts/gpu-kernels.sh
	sh scripts/gpu-kernels.sh hip $@ $(CUDA_KERNELS)

$(OBJDIR)/kernels/cuda/image_cuda.o: build/cuda/tq.fatbin scripts/gpu-embed.sh
	sh scripts/gpu-embed.sh tq_cuda_image $< $(@:.o=.S)
	$(CC) -c $(@:.o=.S) -o $@

$(OBJDIR)/kernels/cuda/image_hip.o: build/hip/tq.hipfb scripts/gpu-embed.sh
	sh scripts/gpu-embed.sh tq_hip_image $< $(@:.o=.S)
	$(CC) -c $(@:.o=.S) -o $@

$(OBJDIR)/lib/cuda/%.cuda.o: lib/cuda/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(OBJDIR)/lib/cuda/%.hip.o: lib/cuda/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DTQ_GPU_HIP $(CFLAGS) -c $< -o $@

$(LIBA): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# tq-train joins MPI jobs (data parallel) when Open MPI's mpicc is there:
# lib/train/mpi.c takes mpi.h's types and dlopens libmpi by the soname the
# link line names (found here), only under a launcher; nothing links MPI, and
# without mpicc (or that soname) tq-train is built without it.
HAVE_MPICC := $(shell command -v mpicc >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_MPICC),1)
MPI_LIBDIRS := $(patsubst -L%,%,$(filter -L%,$(shell mpicc --showme:link)))
MPI_LIBDIR  := $(firstword $(foreach d,$(MPI_LIBDIRS) $(patsubst %/,%,$(dir $(shell $(CC) -print-file-name=libmpi.so))),$(if $(wildcard $(d)/libmpi.so),$(d))))
MPI_SONAME  := $(if $(MPI_LIBDIR),$(shell objdump -p $(MPI_LIBDIR)/libmpi.so 2>/dev/null | sed -n 's/^ *SONAME *//p'))
ifneq ($(MPI_SONAME),)
$(OBJDIR)/lib/train/mpi.o: CPPFLAGS += -DTQ_HAVE_MPI $(shell mpicc --showme:compile) \
    -DTQ_MPI_SONAME='"$(MPI_SONAME)"' -DTQ_MPI_DIR='"$(MPI_LIBDIR)"'
else
BACKEND_NOTES += "mpi: left out of tq-train (no SONAME read from libmpi.so in $(MPI_LIBDIRS))"
endif
endif

$(BINDIR)/%: $(OBJDIR)/cmd/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $< $(LIBA) $(LDLIBS) -o $@

$(OUT)/build/tests/%: tests/unit/%.c $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LIBA) $(LDLIBS) -o $@

$(OUT)/build/tools/%: tests/tools/%.c $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LIBA) $(LDLIBS) -o $@

# ---- set-up: system packages (apt-get as root, else the line to run) ----
deps:
	@sh scripts/deps.sh build
deps-test:
	@sh scripts/deps.sh build test
	@sh scripts/venv.sh
	@sh scripts/venv-bench.sh st
# the demo's model, all-MiniLM-L6-v2, into .venv (best effort: without it the
# demo searches with hash:384 and says why)
deps-demo: deps
	@sh scripts/deps.sh demo || echo "demo: going on without them"
	@sh scripts/venv-demo.sh

# ---- tests ----
check: deps-test
	$(MAKE) --no-print-directory all
	$(MAKE) --no-print-directory check-unit check-bats check-fuzz
	@echo "check: all suites passed"

check-bats: all $(TTOOL_BIN) $(UNIT_BIN) $(FAULT_SHIM)
	TQ_BIN=$(abspath $(BINDIR)) TQ_TEST_TOOLS=$(abspath $(OUT)/build/tools) \
	    TQ_TEST_UNIT=$(abspath $(OUT)/build/tests) TQ_FAULT_SHIM=$(abspath $(FAULT_SHIM)) \
	    $(if $(GPU_STANDIN),TQ_STANDIN_LIB=$(abspath $(STANDIN_LIB_PATH)) TQ_PAD_SHIM=$(abspath $(PAD_SHIM))) \
	    sh tests/run-bats.sh tests/bats

check-fuzz:
	@sh tests/fuzz/run.sh $(if $(FUZZ_SECONDS),$(FUZZ_SECONDS),20)

# ---- the sample pipeline ----
demo: deps-demo
	@$(MAKE) --no-print-directory all >/dev/null
	@sh samples/demo.sh $(abspath $(BINDIR))

bench: deps-test all
	@sh scripts/venv-bench.sh
	@bash scripts/bench.sh $(abspath $(BINDIR))

# On a machine with a GPU, every check that needs one and the GPU figures, in
# build/gpu-check/report.md (scripts/gpu-check.sh says which); without a GPU,
# one line says so. Not part of `make check`: CI machines have no GPU.
gpu-check:
	@TQ_BIN=$(abspath $(BINDIR)) bash scripts/gpu-check.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	    $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/man/man1 \
	    $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 lib/tq.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(wildcard man/*.1) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 $(wildcard man/*.5) $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 644 $(wildcard man/*.7) $(DESTDIR)$(PREFIX)/share/man/man7/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' scripts/tq.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tq.pc
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	for t in $(TOOLS); do \
	    install -m 644 cmd/tq.bash-completion $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$t; \
	done

clean:
	rm -rf build bin lib/libtq.a

-include $(LIB_OBJ:.o=.d) $(TOOLS:%=$(OBJDIR)/cmd/%.d)

# ---- the host fault shim: tests only (tests/faults/README.md) ----
# An LD_PRELOAD library that fails the Nth allocation, mmap, open, write or
# read of a tool (tests/fault-sweep.sh, tests/bats/host-faults.bats). Built
# without the sanitizers even under SAN=1: it sits before their runtime and
# forwards to it, and needs nothing of it.
.PHONY: faults
faults: $(FAULT_SHIM)

$(FAULT_SHIM): tests/faults/host-fault.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -g $(WARN) -fPIC -fvisibility=hidden -pthread -D_GNU_SOURCE -shared $< -ldl -o $@

# ---- the GPU stand-in driver: tests only, never installed (tests/standin/README.md) ----
# It runs the CUDA and HIP backends in `make check` on machines without a GPU;
# it needs g++ (the kernels compile as host C++).
HAVE_GXX := $(shell command -v g++ >/dev/null 2>&1 && echo 1)
GPU_STANDIN := $(if $(GPU_OBJ),$(HAVE_GXX))
STANDIN_LIB_PATH := $(OUT)/build/standin/libtqstandin.so
# One shared library exporting the CUDA driver / cuBLAS / HIP / rocBLAS subset
# lib/cuda uses, with the kernels of kernels/cuda compiled in as host C++; a
# second build of it holds the self-test kernels of tests/standin/selftest.
STANDIN_DIR   := $(OUT)/build/standin
STANDIN_OBJ   := $(patsubst tests/standin/%.c,$(STANDIN_DIR)/%.o,$(filter-out %/fiber-bench.c %/pad-shim.c,$(wildcard tests/standin/*.c))) \
                 $(STANDIN_DIR)/fiber_x86_64.o
STANDIN_FLAGS := $(OPT) $(WARN) -fPIC -fvisibility=hidden -pthread -MMD -MP -D_GNU_SOURCE
# STANDIN_ARCH=-march=native makes fmaf an instruction instead of a libm call
# (the op suite ~15% faster, same bits: ISO C++ contracts nothing); off by
# default, as a build dir carried to another CPU would then die of SIGILL.
STANDIN_ARCH  ?=
STANDIN_KFLAGS := -std=c++17 -ffp-contract=off $(STANDIN_FLAGS) $(STANDIN_ARCH) -DTQ_EMU -I. -Itests/standin -Ikernels/cuda
STANDIN_LIB   := $(STANDIN_DIR)/libtqstandin.so
# a CUDA driver that pads every launch's argument size to 8 bytes on its way
# to the stand-in: the bug an H200 found, planted (tests/bats/gpu-faults.bats)
PAD_SHIM      := $(STANDIN_DIR)/libtqpadshim.so
.PHONY: standin check-standin standin-bench

standin: $(STANDIN_LIB) $(PAD_SHIM)

$(PAD_SHIM): tests/standin/pad-shim.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(STANDIN_FLAGS) -shared $(SANFLAGS) $< -ldl -o $@

$(STANDIN_DIR)/%.o: tests/standin/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(STANDIN_FLAGS) -c $< -o $@

$(STANDIN_DIR)/fiber_x86_64.o: tests/standin/fiber_x86_64.S
	@mkdir -p $(dir $@)
	$(CC) $(STANDIN_FLAGS) -c $< -o $@

# the registries are regenerated every time (a kernel file may have come or
# gone) but rewritten only when they change
$(STANDIN_DIR)/registry-main.cpp: FORCE
	@mkdir -p $(dir $@)
	@sh tests/standin/gen-registry.sh $@ $(wildcard kernels/cuda/*.cu)

$(STANDIN_DIR)/registry-selftest.cpp: FORCE
	@mkdir -p $(dir $@)
	@sh tests/standin/gen-registry.sh $@ $(wildcard tests/standin/selftest/*.cu)

# kernels are rebuilt when their flags change (STANDIN_ARCH, SAN), as FLAGS_STAMP does
$(STANDIN_DIR)/kflags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(STANDIN_KFLAGS)' | cmp -s - $@ || echo '$(STANDIN_KFLAGS)' > $@

$(STANDIN_DIR)/registry-%.o: $(STANDIN_DIR)/registry-%.cpp $(STANDIN_DIR)/kflags
	g++ $(STANDIN_KFLAGS) -c $< -o $@

$(STANDIN_DIR)/libtqstandin%.so: $(STANDIN_OBJ) $(STANDIN_DIR)/registry%.o
	g++ -shared $(SANFLAGS) -pthread $^ -lm -o $@

$(STANDIN_DIR)/libtqstandin.so: $(STANDIN_OBJ) $(STANDIN_DIR)/registry-main.o
	g++ -shared $(SANFLAGS) -pthread $^ -lm -o $@

$(STANDIN_DIR)/selftest: $(wildcard tests/standin/selftest/*.[ch]) tests/standin/abi.h \
                        $(STANDIN_DIR)/libtqstandin-selftest.so
	$(CC) -std=c11 $(OPT) $(WARN) -D_GNU_SOURCE -Itests/standin $(wildcard tests/standin/selftest/*.c) \
	    $(STANDIN_DIR)/libtqstandin-selftest.so -Wl,-rpath,$(abspath $(STANDIN_DIR)) -ldl -lm -o $@

check-standin: $(STANDIN_DIR)/selftest $(STANDIN_LIB)
	@sh tests/run-unit.sh $(STANDIN_DIR)/selftest

# the cost of a fiber switch, x86-64 assembly against ucontext (a figure, not a test)
standin-bench:
	@mkdir -p $(STANDIN_DIR)
	$(CC) -std=c11 -O2 -D_GNU_SOURCE -Itests/standin tests/standin/fiber-bench.c \
	    tests/standin/fiber.c tests/standin/fiber_x86_64.S -o $(STANDIN_DIR)/fiber-bench
	$(CC) -std=c11 -O2 -D_GNU_SOURCE -DTQ_FIBER_UCONTEXT -Itests/standin \
	    tests/standin/fiber-bench.c tests/standin/fiber.c -o $(STANDIN_DIR)/fiber-bench-uc
	@$(STANDIN_DIR)/fiber-bench && $(STANDIN_DIR)/fiber-bench-uc

-include $(wildcard $(STANDIN_DIR)/*.d)

# The unit suites, then the stand-in's own tests and the cross-backend op suite
# on CUDA and HIP through it, when this build has them: two thread-order seeds,
# one under the sanitizers (seed 2, which runs every kernel, the backends' own
# matmul included; the sanitized suite is ~2.5x slower and CI's time is finite),
# its slowest groups shared between CUDA and HIP (run-gpu-standin.sh: it took
# 20 of CI's 65 minutes).
GPU_SEEDS := $(if $(filter 1,$(SAN)),2,1 2)
GPU_SHARE := $(if $(filter 1,$(SAN)),share)
check-unit: $(UNIT_BIN) $(if $(GPU_STANDIN),$(STANDIN_DIR)/selftest $(STANDIN_LIB) $(PAD_SHIM))
	@sh tests/run-unit.sh $(UNIT_BIN) $(if $(GPU_STANDIN),$(STANDIN_DIR)/selftest)
	@$(if $(GPU_STANDIN),sh tests/run-gpu-standin.sh $(OUT)/build/tests/test_ops $(STANDIN_LIB) '$(GPU_SEEDS)' $(GPU_SHARE),echo "gpu: skipped: $(if $(GPU_OBJ),no g++ for the stand-in driver,this build has neither CUDA nor HIP (nvcc and hipcc not found))")
