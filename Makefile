# floe's user interface: every target installs what it needs first.
#   make build      configure + build the release preset (build/release)
#   make test       build; unit tests (ctest), the same under ASan+UBSan, then the
#                   integration tests (pytest) against real PostgreSQL and readers
#   make test-asan  only the ASan+UBSan build and its unit tests
#   make format     clang-format the C++ sources
#   make clean      remove build/ (keeps .venv)
PRESET ?= release
BUILD_DIR := build/$(PRESET)
PYTEST_ARGS ?=

.PHONY: bootstrap build test unit-test integration-test test-asan format clean

bootstrap:
	@scripts/bootstrap

build: bootstrap
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET)

unit-test: build
	ctest --preset $(PRESET)

integration-test: build
	FLOE_BUILD_DIR=$(CURDIR)/$(BUILD_DIR) .venv/bin/python -m pytest tests/integration $(PYTEST_ARGS)

# The sanitizer run comes before pytest so that pytest's summary closes the output.
test: unit-test test-asan integration-test

test-asan:
	$(MAKE) unit-test PRESET=asan-ubsan

format:
	@command -v clang-format >/dev/null || { echo 'make format needs clang-format: apt-get install clang-format'; exit 1; }
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build
