# kiln: `make demo` and `make test` do all the set-up they need (as root).
# Tools run with Debian's interpreter, named explicitly: /usr/bin/python3.

PY        := /usr/bin/python3
BUILD     := build
ASAN      := build-asan
IMAGES    := /var/lib/kiln/images
RECIPE    := images/base/build.sh
IMAGE     := $(IMAGES)/base-$(shell sha256sum $(RECIPE) | cut -c1-16)
JOBS      := $(shell nproc)

.PHONY: all setup build asan image demo test unit integration hostile bench format clean

all: build

# System packages (idempotent) and the base image.
setup:
	bash scripts/setup.sh
	$(MAKE) image

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: $(BUILD)/build.ninja
	ninja -C $(BUILD) -j $(JOBS)

# Host binaries under AddressSanitizer + UBSan (the agent stays static).
$(ASAN)/build.ninja:
	cmake -S . -B $(ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON -DKILN_BENCH=OFF

asan: $(ASAN)/build.ninja
	ninja -C $(ASAN) -j $(JOBS)

# Debian bookworm minbase, keyed by the recipe's hash; built once.
image:
	@if [ -x $(IMAGE)/usr/bin/python3 ]; then echo "base image ready: $(IMAGE)"; \
	else mkdir -p $(IMAGES) && bash $(RECIPE) $(IMAGE); fi

demo: setup build
	$(PY) examples/demo.py --bin-dir $(BUILD)/bin

# Unit tests and integration tests (real kilnd, real gVisor), sanitized.
test: setup asan
	$(ASAN)/bin/kiln_unit_tests
	KILN_BIN_DIR=$(CURDIR)/$(ASAN)/bin KILN_IMAGE_DIR=$(IMAGES) $(PY) -m pytest -q tests/integration

unit: asan
	$(ASAN)/bin/kiln_unit_tests

integration: build
	KILN_BIN_DIR=$(CURDIR)/$(BUILD)/bin KILN_IMAGE_DIR=$(IMAGES) $(PY) -m pytest -q tests/integration -m 'not hostile'

hostile: build
	KILN_BIN_DIR=$(CURDIR)/$(BUILD)/bin KILN_IMAGE_DIR=$(IMAGES) $(PY) -m pytest -q tests/integration -m hostile

bench: setup build
	$(PY) bench/run.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/network.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/rewards.py --kilnd $(BUILD)/bin/kilnd
	$(PY) sdk/python/bench_overhead.py --kilnd $(BUILD)/bin/kilnd

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN)
