# floe's user interface: every target installs what it needs first.
#   make build      configure + build the release preset (build/release)
#   make test       build; unit tests (ctest), then the integration tests (pytest, on
#                   PYTEST_WORKERS processes) against real PostgreSQL and readers: the
#                   whole suite on 15, the every_version tests on 16, 17 and 18
#   make test-asan  the unit tests again, built with ASan+UBSan (a separate target:
#                   its build alone takes 7 of the 30 minutes `make test` may take)
#   make demo       a throwaway PostgreSQL, a live workload and `floe run --duration 30s`
#                   into build/demo/, then what landed, read through DuckDB
#   make bench      run the benchmarks and write BENCHMARKS.md (minutes)
#   make fuzz       build the libFuzzer targets with clang (ASan+UBSan) and run each of
#                   FUZZ_TARGETS for FUZZ_SECONDS (per target, default 60) on its seeds
#                   from tests/fuzz/corpus/; fails if any target crashes
#   make soak       the randomized differential test (tests/integration/differential.py)
#                   with random seeds for SOAK_SECONDS (default 3600), floe killed at
#                   random; prints rounds, kills, changes checked and the seeds, and
#                   stops at the first failing seed (FLOE_DIFF_SEEDS=1,2 re-runs seeds)
#   make soak-crash the crash test (tests/integration/test_run_crash.py) for
#                   SOAK_SECONDS with `floe run` SIGKILLed every 30-60 s under the
#                   workload; Bronze must equal the audit trigger at the end
#   make test-matrix the whole integration suite on each PostgreSQL of the matrix (16,
#                   17, 18; `make test` runs it on 15, and the every_version tests on each)
#   make test-long  the tests CI runs at reduced size, at full size (a 1M-row
#                   transaction killed while floe writes it)
#   make format     clang-format the C++ sources
#   make clean      remove build/ (keeps .venv)
PRESET ?= release
BUILD_DIR := build/$(PRESET)
PYTEST_ARGS ?=
# The integration tests mostly wait on servers, so more workers than cores pays
# (pytest-xdist; a test file is one worker's whole, conftest.py orders them).
PYTEST_WORKERS ?= 4
XDIST := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
# The every_version tests, a few long ones in few files: each test on its own.
XDIST_VERSIONS := -n $(PYTEST_WORKERS) --dist load
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= pgoutput copy_binary type_text message_json manifest table_metadata
SOAK_SECONDS ?= 3600

PG_VERSIONS ?= 16 17 18

.PHONY: bootstrap build test unit-test integration-test integration-versions test-matrix test-asan bench demo fuzz soak soak-crash test-long format clean

bootstrap:
	@scripts/bootstrap

build: bootstrap
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET)

unit-test: build
	scripts/check-deps
	scripts/check-sizes
	ctest --preset $(PRESET)

integration-test: build
	FLOE_BUILD_DIR=$(CURDIR)/$(BUILD_DIR) .venv/bin/python -m pytest tests/integration \
	  $(XDIST) --durations=25 $(PYTEST_ARGS)

# The tests marked every_version, on each PostgreSQL of the matrix besides 15.
integration-versions: build
	set -e; for v in $(PG_VERSIONS); do \
	  FLOE_PG_VERSION=$$v FLOE_BUILD_DIR=$(CURDIR)/$(BUILD_DIR) .venv/bin/python -m pytest \
	    tests/integration -m every_version $(XDIST_VERSIONS) $(PYTEST_ARGS); \
	done

test-matrix: build
	set -e; for v in $(PG_VERSIONS); do \
	  FLOE_PG_VERSION=$$v FLOE_BUILD_DIR=$(CURDIR)/$(BUILD_DIR) .venv/bin/python -m pytest \
	    tests/integration $(XDIST) --durations=10 $(PYTEST_ARGS); \
	done

# pytest's summary of the whole suite closes the output.
test: unit-test integration-versions integration-test

# Only the unit-test executables (ctest runs nothing else): no CLI, tools or benches.
test-asan: bootstrap
	cmake --preset asan-ubsan >/dev/null
	cmake --build --preset asan-ubsan --target floe_unit_tests
	ctest --preset asan-ubsan

bench: build
	bench/run

# The streaming benchmark on PostgreSQL 15, 16, 17 and 18 (BENCHMARKS.md).
bench-versions: build
	FLOE_BUILD_DIR=$(CURDIR)/$(BUILD_DIR) .venv/bin/python bench/versions_bench.py \
	  > $(BUILD_DIR)/versions_bench.json
	.venv/bin/python bench/versions_bench.py --render $(BUILD_DIR)/versions_bench.json

demo: bootstrap build
	FLOE_BIN=$(CURDIR)/$(BUILD_DIR)/src/floe/cli/floe scripts/demo

fuzz:
	@scripts/bootstrap --fuzz
	CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DFLOE_FUZZ=ON -DFLOE_BUILD_TESTS=OFF >/dev/null
	cmake --build build/fuzz -j2 --target $(addsuffix _fuzz,$(FUZZ_TARGETS))
	scripts/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

soak: build
	FLOE_BUILD_DIR=$(CURDIR)/$(BUILD_DIR) .venv/bin/python tests/integration/differential.py \
	  --seconds $(SOAK_SECONDS)

soak-crash: build
	FLOE_BUILD_DIR=$(CURDIR)/$(BUILD_DIR) FLOE_CRASH_SECONDS=$(SOAK_SECONDS) \
	  FLOE_CRASH_KILL_INTERVAL=30-60 .venv/bin/python -m pytest -s \
	  tests/integration/test_run_crash.py -k sigkill_at_random_moments

test-long: build
	FLOE_BUILD_DIR=$(CURDIR)/$(BUILD_DIR) FLOE_BIG_TX_ROWS=1000000 .venv/bin/python -m pytest \
	  tests/integration/test_stream_faults.py -k big_transaction_spanning

format:
	@command -v clang-format >/dev/null || \
	  { echo 'make format needs clang-format: apt-get install clang-format'; exit 1; }
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build
