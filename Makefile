# kiln: `make` builds, `make test` runs the tests, `make demo` runs the demo.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
DEB_PACKAGES := cmake g++ libxtensor-dev libxsimd-dev libcli11-dev libboost-test-dev libopenblas-dev libreadline-dev libdnnl-dev

.PHONY: all deps test-deps build test demo demo-all bench bench-compare bench-gpu sanitize clean format fuzz assignment assignment-release

all: build

# Installs the Debian packages that are missing, and nothing when all are present.
# graphviz draws the report's graphs (kiln report; a built-in layout otherwise).
DEB_PACKAGES += graphviz
# `make test` also needs chromium: the report's browser test (tests/report/browser_check.py)
# loads a rendered report headless; without it that test is skipped with its reason.
TEST_DEB_PACKAGES := chromium
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make $@: installing$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
endef
deps:
	$(call install_missing,$(DEB_PACKAGES))
test-deps: deps
	$(call install_missing,$(TEST_DEB_PACKAGES))

$(BUILD)/Makefile: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

test: build test-deps
	cd $(BUILD) && ctest --output-on-failure -j 1
	@# Count test cases: the leaves of each binary's --list_content tree (suites have children).
	@n=0; for t in $(BUILD)/test_*; do \
	  c=$$($$t --list_content 2>&1 | awk '{ d = match($$0, /[^ ]/); if (NR > 1 && d <= pd) n++; pd = d } END { print n + (NR > 0) }'); \
	  n=$$((n + c)); done; \
	  echo "kiln: $$n test cases passed"

# Random programs, compiled vs eager, from two generators (tests/jit/test_differential.cpp:
# in-place ops, breaks, item(), dynamic shapes, backward; test_differential_wide.cpp: random
# streams across breaks, argument layouts, dtypes and casts, where, broadcasting, long rows,
# returned arguments, five calls each): prints "programs N, mismatches M" per suite. N
# programs per backend (eager, aot_eager; N/10 under inductor). DEVICE=cuda on a GPU machine.
N ?= 1000
SEED ?= 0
DEVICE ?= cpu
fuzz: build
	cd $(BUILD) && KILN_FUZZ_PROGRAMS=$(N) KILN_FUZZ_SEED=$(SEED) KILN_FUZZ_DEVICE=$(DEVICE) KILN_CACHE_DIR=$$PWD/kernel-cache \
	  ./test_jit --run_test=jit_differential:jit_differential_wide --log_level=message

# The lessons of tutorials/ (tutorials/README.md), built alone and run in order; demo-all
# adds lesson 08, the timed eager-vs-compiled MLP (N_ITERS = 10), lesson 09 (ResNet-18 and
# the GPT decoder, small sizes) and lesson 10 (the compiler's passes).
LESSONS := 00_eager 01_jit_basics 02_graph_capture 03_graph_breaks 04_vs_tracing 05_dynamic_shapes \
           06_aot_autograd 07_fusion_and_codegen
demo: deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS) --target $(addprefix tutorial_,$(LESSONS))
	@for l in $(LESSONS); do echo "==== lesson $$l"; $(BUILD)/tutorial_$$l || exit 1; done

demo-all: demo
	cmake --build $(BUILD) -j $(JOBS) --target tutorial_08_speedups tutorial_09_real_models tutorial_10_compiler_passes
	@for l in 08_speedups 09_real_models 10_compiler_passes; do echo "==== lesson $$l"; $(BUILD)/tutorial_$$l || exit 1; done

bench: build
	@for b in $(BUILD)/bench_*; do echo "== $$b"; $$b; done

# kiln vs PyTorch (eager and torch.compile) on the CPU, in one session; needs `pip install torch`.
# On a GPU machine with PyTorch: kiln's and PyTorch's GPU benches, one table (docs/cuda.md).
bench-gpu: build
	$(BUILD)/bench_gpu > $(BUILD)/gpu.json
	python3 bench/torch_gpu.py > $(BUILD)/torch_gpu.json
	python3 bench/compare_gpu.py $(BUILD)/gpu.json $(BUILD)/torch_gpu.json

bench-compare: build
	$(BUILD)/bench_cpu_codegen > $(BUILD)/cpu_codegen.json
	python3 bench/torch_cpu.py > $(BUILD)/torch_cpu.json
	python3 bench/compare.py $(BUILD)/cpu_codegen.json $(BUILD)/torch_cpu.json

# Course assignments (assignments/README.md): `make assignment A=2` builds assignment 2 against
# assignments/a2/student.cpp and prints a score per task; `make assignment-release` writes the
# students' copy, without assignments/solutions/, assignments/heldout/ and the planted cheats
# (tests/assignments/cheats/), to $(BUILD)/assignments-release(.tar.gz).
A ?= 1
assignment: deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS) --target assignment_$(A)_student
	$(BUILD)/assignment_grader $(A)

assignment-release:
	rm -rf $(BUILD)/assignments-release $(BUILD)/assignments-release.tar.gz
	mkdir -p $(BUILD)/assignments-release/kiln
	git ls-files -co --exclude-standard | grep -v -e '^assignments/solutions/' -e '^assignments/heldout/' -e '^tests/assignments/cheats/' | tar -cf - -T - | tar -xf - -C $(BUILD)/assignments-release/kiln
	tar -czf $(BUILD)/assignments-release.tar.gz -C $(BUILD)/assignments-release kiln
	@echo "assignment-release: $(BUILD)/assignments-release/kiln and $(BUILD)/assignments-release.tar.gz (stubs, no solutions, held-out tests or planted cheats)"

sanitize: deps
	cmake -S . -B $(BUILD)-sanitize -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON
	cmake --build $(BUILD)-sanitize -j $(JOBS)
	cd $(BUILD)-sanitize && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD)-sanitize
