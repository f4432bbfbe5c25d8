# kiln: `make demo` and `make test` do all the set-up they need (as root).
# Tools run with Debian's interpreter, named explicitly: /usr/bin/python3.

PY        := /usr/bin/python3
BUILD     := build
ASAN      := build-asan
IMAGES    := /var/lib/kiln/images
RECIPE    := images/base/build.sh
IMAGE     := $(IMAGES)/base-$(shell sha256sum $(RECIPE) | cut -c1-16)
JOBS      := $(shell nproc)

.PHONY: all packages setup setup-node setup-runsc setup-console ray-env e2b-env daytona-env harbor-env playwright-env build build-demo asan fuzz-build fuzz soak image demo test unit integration hostile bench density format clean ci-fresh demo-fresh e2b-templates sandboxfusion-image sandboxfusion-image-full sandboxfusion-languages

all: build

# Each step prints one line with its time; the whole output goes to
# build/setup.log (scripts/step.sh; KILN_VERBOSE=1 shows it as it comes).
STEP      := bash scripts/step.sh

# System packages first; then Node, the pinned runsc and the base image at
# once (idempotent): runsc's compile is CPU, the base image mostly the
# mirror and the disk, so the image costs no time beside it. Every apt
# install is in `packages`, so the others never wait for dpkg's lock.
packages:
	@$(STEP) packages bash scripts/setup.sh packages

SETUP_STEPS := setup-node setup-runsc image setup-console
setup: packages
	@$(MAKE) --no-print-directory -j3 $(SETUP_STEPS)

setup-node:
	@$(STEP) node bash scripts/setup.sh node

setup-runsc:
	@$(STEP) runsc bash scripts/setup.sh runsc

# The web console's bundle (console/ → build/console, served at /ui): npm
# packages from its lockfile, so after Node.
setup-console: setup-node
	@$(STEP) console bash scripts/setup.sh console

# One compiler for what ships and what is tested: clang 14 (libFuzzer needs
# it, and the sanitized tree is shared with the fuzz targets). Unity builds,
# one unit per library (batch size 0): a unit's time here is mostly the
# optimizer and code generator on nlohmann-json and Beast templates, which
# every unit instantiates again, so fewer units cost less
# (docs/notes/2026-12-02-build-and-setup.md). Line tables only: enough for backtraces, perf and sanitizer
# reports, and full DWARF cost a tenth of each compile.
CMAKE     := CC=clang-14 CXX=clang++-14 cmake -S . -G Ninja -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0
RELEASE   := -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG"

build:
	@$(STEP) build sh -c '[ -f $(BUILD)/build.ninja ] || $(CMAKE) -B $(BUILD) $(RELEASE); ninja -C $(BUILD) -j $(JOBS)'

# What the demo runs, and nothing else: the daemon and the agent it puts in
# each sandbox (no CLI, unit tests or benchmarks; `make build` adds them).
build-demo:
	@$(STEP) build sh -c '[ -f $(BUILD)/build.ninja ] || $(CMAKE) -B $(BUILD) $(RELEASE); ninja -C $(BUILD) -j $(JOBS) kilnd kiln-agent'

# The test tree: host binaries, unit tests and the libFuzzer targets
# (tests/fuzz) under AddressSanitizer + UBSan, with libFuzzer's coverage
# (the agent stays static and plain). The integration tests run its kilnd.
asan:
	@$(STEP) "asan build" sh -c '[ -f $(ASAN)/build.ninja ] || $(CMAKE) -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only -DKILN_SANITIZE=ON -DKILN_FUZZ=ON -DKILN_BENCH=OFF; ninja -C $(ASAN) -j $(JOBS) all fuzzers'

FUZZ_SECONDS ?= 60
FUZZ_SEED    ?=
fuzz-build: asan

# Each target for FUZZ_SECONDS (after its committed regressions and seeds);
# fails on any crash, leak or timeout. One JSON line of figures per target.
fuzz: fuzz-build
	$(PY) tests/fuzz/run.py --bin-dir $(ASAN)/bin --seconds $(FUZZ_SECONDS) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))

# Debian bookworm minbase, keyed by the recipe's hash; built once.
image:
	@mkdir -p $(IMAGES)
	@$(STEP) "base image" sh -c 'if [ -x $(IMAGE)/usr/bin/python3 ]; then echo "base image ready: $(IMAGE)"; else bash $(RECIPE) $(IMAGE); fi'

# Ray for kiln.ray's tests, in its own venv (/opt/kiln/ray-venv).
ray-env:
	@$(STEP) ray bash scripts/setup.sh ray

e2b-env:
	@$(STEP) e2b bash scripts/setup.sh e2b

daytona-env:
	@$(STEP) daytona bash scripts/setup.sh daytona

# Harbor for test_harbor.py and bench/harbor.py (/opt/kiln/harbor-venv, on the
# machine's Python >= 3.12). E2B's SDKs likewise (/opt/kiln/e2b-venv); the tests
# use these when they hold the pinned versions, else install their own.
harbor-env:
	@$(STEP) harbor bash scripts/setup.sh harbor

# Playwright for the console's browser tests (/opt/kiln/console-venv).
playwright-env:
	@$(STEP) playwright bash scripts/setup.sh playwright

# The demo's binaries build beside setup's runsc and base image.
demo: packages
	@$(MAKE) --no-print-directory -j4 $(SETUP_STEPS) build-demo
	@$(PY) examples/demo.py --bin-dir $(BUILD)/bin

# Both tiers, in order: the unit tier, and only if it passed the integration
# tests (real kilnd, real gVisor, as root), sanitized: most of them on
# IT_WORKERS pytest-xdist workers (each with a kilnd of its own; modules
# sharing the tests' own network hosts on one worker), then the `serial`
# ones alone (they time neighbours, step the clock, compare host-wide state).
IT_WORKERS ?= 3
IT_ENV    := KILN_BIN_DIR=$(CURDIR)/$(ASAN)/bin KILN_IMAGE_DIR=$(IMAGES)
test: setup ray-env e2b-env daytona-env harbor-env playwright-env
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=5 FUZZ_SEED=1
	$(IT_ENV) $(PY) -m pytest -q -p no:cacheprovider --durations=15 -n $(IT_WORKERS) --dist loadgroup -m 'not serial and not languages' tests/integration
	$(IT_ENV) $(PY) -m pytest -q -p no:cacheprovider --durations=15 -m serial tests/integration

# The unit tier: no root, no gVisor, no daemon. The sanitized C++ unit tests,
# then the SDKs' own tests (sdk/python/tests; sdk/js/test/unit, which needs
# Node >= 20 and npm, as `make setup` installs them).
unit: asan
	$(ASAN)/bin/kiln_unit_tests
	$(PY) -m pytest -q sdk/python/tests
	cd sdk/js && npm ci --no-audit --no-fund && npm run --silent test:unit

integration: build
	KILN_BIN_DIR=$(CURDIR)/$(BUILD)/bin KILN_IMAGE_DIR=$(IMAGES) $(PY) -m pytest -q tests/integration -m 'not hostile'

hostile: build
	KILN_BIN_DIR=$(CURDIR)/$(BUILD)/bin KILN_IMAGE_DIR=$(IMAGES) $(PY) -m pytest -q tests/integration -m hostile

bench: setup ray-env e2b-env daytona-env harbor-env playwright-env build
	$(PY) bench/runsc_flags.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/run.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/network.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/rewards.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/rollouts.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/images.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/harbor.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/pause.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/interpreter.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/ports.py --kilnd $(BUILD)/bin/kilnd
	/opt/kiln/e2b-venv/bin/python bench/e2b_clients.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/sandboxfusion.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/snapshot_modes.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/console.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/tti.py --kilnd $(BUILD)/bin/kilnd
	$(PY) bench/first_command.py --kilnd $(BUILD)/bin/kilnd
	$(PY) sdk/python/bench_overhead.py --kilnd $(BUILD)/bin/kilnd
	/opt/kiln/ray-venv/bin/python bench/ray_bench.py --kilnd $(BUILD)/bin/kilnd

# Bounded load against one kilnd for SOAK_MINUTES (docs/guide.md, "Soak"), restarted
# once with SIGTERM and once with kill -9; fails on errors or resource growth.
SOAK_MINUTES ?= 30
soak: setup build
	SOAK_MINUTES=$(SOAK_MINUTES) $(PY) bench/soak.py --kilnd $(BUILD)/bin/kilnd --minutes $(SOAK_MINUTES)

# Idle sandboxes until the host refuses or a neighbour slows (minutes; not in bench).
density: setup build
	$(PY) bench/density.py --kilnd $(BUILD)/bin/kilnd

# E2B's code interpreter template: code-interpreter-v1, a kiln image (python3
# + numpy, pandas, matplotlib) built from examples/images/code_interpreter.py's
# recipe under the key in KILN_API_KEY, at KILN_API_URL (docs/api.md, "E2B's SDKs").
e2b-templates:
	$(PY) examples/images/code_interpreter.py --name code-interpreter-v1

# SandboxFusion's language image (verl's code rewards, docs/api.md
# "SandboxFusion's API"): `sandboxfusion`, built under the key in
# KILN_API_KEY at KILN_API_URL from examples/images/sandboxfusion.py's
# recipe, and rebuilt only when that recipe changes. Built under an admin
# key, it serves every key. The core set (python, pytest, cpp, nodejs, go,
# java, rust, bash) by default; -full for every language the front serves.
sandboxfusion-image:
	$(PY) examples/images/sandboxfusion.py --set core
sandboxfusion-image-full:
	$(PY) examples/images/sandboxfusion.py --set full

# The full language matrix against a real kilnd (the core set is in `make
# test`): builds the full image once per machine on the SandboxFusion
# state the tests keep (KILN_SF_STATE_DIR, /var/lib/kiln/cache/sandboxfusion).
sandboxfusion-languages: setup asan
	$(IT_ENV) $(PY) -m pytest -q -p no:cacheprovider -m languages tests/integration/test_sandboxfusion_languages.py

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

# The test command as a machine that never ran kiln runs it: a fresh clone
# of HEAD in a mount and PID namespace whose /tmp, /var/tmp, $$HOME caches
# and /var/lib/kiln (but its base image) start empty (scripts/ci-fresh.sh).
ci-fresh:
	@bash scripts/ci-fresh.sh

# `make demo` as on a new machine: no runsc, Go caches, base image or
# /opt/kiln (Debian's packages stay installed).
demo-fresh:
	@bash scripts/ci-fresh.sh --demo --bare

clean:
	rm -rf $(BUILD) $(ASAN) build-fuzz
