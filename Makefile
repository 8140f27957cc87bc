# floe's user interface: every target installs what it needs first.
#   make build      configure + build the release preset (build/release)
#   make test       build, then unit tests (ctest) and integration tests (pytest)
#   make test-asan  build with ASan+UBSan and run the unit tests under it
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

test: unit-test integration-test

test-asan:
	$(MAKE) unit-test PRESET=asan-ubsan

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build
