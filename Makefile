# The two commands of the README:  `make demo`  and  `make test`.
# Both install what is missing (Debian packages, .venv), build, then run.
# VENV and BUILD_DIR can be overridden to keep several builds apart.
VENV      ?= .venv
BUILD_DIR ?= build/release
PY        := $(VENV)/bin/python
JOBS      ?= $(shell nproc)

.PHONY: deps build demo test test-cpp test-py test-sanitize test-fuzz test-tsan bench clean \
        wheel free-threaded free-threaded-if-cached

deps:
	VENV=$(VENV) ./scripts/install_deps.sh

build: deps
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY) -m pip install --no-build-isolation --no-deps -q \
	  -Cbuild-dir=$(BUILD_DIR) -Ccmake.define.LUMINA_BUILD_TESTS=ON .

demo: build
	$(VENV)/bin/luminamoon demo

test-cpp: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

test-py: build wheel free-threaded-if-cached
	./scripts/run_python_tests.sh $(PY)

test: test-cpp test-py test-sanitize test-tsan

# Issue 16: ASan+UBSan build of the C++ data tests and the fuzz targets (every
# corpus replayed, each target fuzzed FUZZ_SECONDS), and a ThreadSanitizer
# build of the pipeline and dedup tests; data engine only, clang (skipped
# with a message where clang is missing). test-fuzz is part of test-sanitize.
FUZZ_SECONDS ?= 20
test-sanitize: deps
	VENV=$(VENV) JOBS=$(JOBS) FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/sanitizer_tests.sh asan

test-fuzz: test-sanitize

test-tsan: deps
	JOBS=$(JOBS) ./scripts/sanitizer_tests.sh tsan

bench: build
	$(PY) bench/run_all.py

clean:
	rm -rf build

# Issue 22: a self-contained wheel (pip wheel + auditwheel repair) into dist/,
# from the same CMake folder as `make build` (only packaging is redone: ~1 min),
# tested on a bare Debian root by tests/package/test_bare_debian_wheel.py.
wheel: build
	VENV=$(VENV) WHEEL_BUILD_DIR=$(BUILD_DIR) WHEEL_BUILD_TESTS=ON JOBS=$(JOBS) ./scripts/build_wheel.sh

# A free-threaded CPython 3.13t from Debian's source (cached under
# /var/cache/luminamoon, ~10 min once per machine) and luminamoon built for it.
free-threaded:
	VENV=$(VENV) ./scripts/install_deps.sh --free-threaded

# In CI: the package for the free-threaded interpreter where one is cached
# (tests/package/test_free_threaded.py skips with the reason otherwise).
FT_PYTHON ?= /var/cache/luminamoon/python3.13t/bin/python3.13t
free-threaded-if-cached:
	@if [ -x $(FT_PYTHON) ]; then VENV=$(VENV) JOBS=$(JOBS) FT_BUILD_DIR=$(BUILD_DIR) FT_BUILD_TESTS=ON FT_CUDA_KERNELS=ON \
	  ./scripts/build_free_threaded_package.sh; \
	else echo "[free-threaded] no cached interpreter ($(FT_PYTHON)): its tests skip; make free-threaded builds it"; fi
