# The two commands of the README:  `make demo`  and  `make test`.
# Both install what is missing (Debian packages, .venv), build, then run.
# VENV and BUILD_DIR can be overridden to keep several builds apart.
VENV      ?= .venv
BUILD_DIR ?= build/release
PY        := $(VENV)/bin/python
JOBS      ?= $(shell nproc)

.PHONY: deps build demo test test-cpp test-py test-sanitize test-fuzz test-tsan bench clean

deps:
	VENV=$(VENV) ./scripts/install_deps.sh

build: deps
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY) -m pip install --no-build-isolation --no-deps -q \
	  -Cbuild-dir=$(BUILD_DIR) -Ccmake.define.LUMINA_BUILD_TESTS=ON .

demo: build
	$(VENV)/bin/luminamoon demo

test-cpp: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

test-py: build
	$(PY) -m pytest -q tests

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
