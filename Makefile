# tq: one entry point. `make` builds lib/libtq.a and bin/tq-*; `make check` runs
# every test; `make demo` runs a sample pipeline; `make bench` measures against
# the peers; `make install PREFIX=...` installs. `make SAN=1 ...` builds and tests
# under AddressSanitizer and UndefinedBehaviorSanitizer in build/san/.

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

.SECONDARY:
.PHONY: FORCE all deps deps-test check check-unit check-bats check-fuzz check-man demo bench install clean notes
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

# f16/bf16 and CPU kernels are hot loops: let the compiler vectorize them.
$(OBJDIR)/lib/dtype.o $(OBJDIR)/lib/cpu/%.o: OPT += $(if $(filter 1,$(SAN)),,-O3)
# tq-train's optimizer updates every parameter each step: vectorized too (sqrt
# vectorizes only without errno, which nothing there reads).
$(OBJDIR)/lib/train/optim.o: OPT += $(if $(filter 1,$(SAN)),,-O3 -fno-math-errno)

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

# tq-train joins MPI jobs (data parallel) when Open MPI's mpicc is there; libtq
# never links MPI, and without mpicc tq-train is built without it.
HAVE_MPICC := $(shell command -v mpicc >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_MPICC),1)
$(OBJDIR)/cmd/tq-train.o: CPPFLAGS += -DTQ_HAVE_MPI $(shell mpicc --showme:compile)
$(BINDIR)/tq-train: LDLIBS += $(shell mpicc --showme:link)
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

# ---- tests ----
check: deps-test
	$(MAKE) --no-print-directory all
	$(MAKE) --no-print-directory check-unit check-bats check-fuzz
	@echo "check: all suites passed"

check-unit: $(UNIT_BIN)
	@sh tests/run-unit.sh $(UNIT_BIN)

check-bats: all $(TTOOL_BIN)
	TQ_BIN=$(abspath $(BINDIR)) TQ_TEST_TOOLS=$(abspath $(OUT)/build/tools) sh tests/run-bats.sh tests/bats

check-fuzz:
	@sh tests/fuzz/run.sh $(if $(FUZZ_SECONDS),$(FUZZ_SECONDS),20)

# ---- the sample pipeline ----
demo: deps
	@$(MAKE) --no-print-directory all >/dev/null
	@sh samples/demo.sh $(abspath $(BINDIR))

bench: deps-test all
	@sh scripts/venv-bench.sh
	@bash scripts/bench.sh $(abspath $(BINDIR))

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

clean:
	rm -rf build bin lib/libtq.a

-include $(LIB_OBJ:.o=.d) $(TOOLS:%=$(OBJDIR)/cmd/%.d)
