# ferrolock: `make demo` runs the example, `make test` runs every test.
# Both install what is missing: redis-server (Debian package), a venv with
# maturin and pytest, and the extension built in release mode.

VENV   ?= .venv
PY     := $(VENV)/bin/python
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all test test-rust test-python demo build-dev redis venv lint format clean

all: lint test

redis:
	@{ command -v redis-server && command -v redis-sentinel && command -v openssl; } >/dev/null 2>&1 || { \
	  echo "installing redis-server (Debian packages)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server redis-tools redis-sentinel openssl >/dev/null; }

venv: $(VENV)/.ready
$(VENV)/.ready: tests/requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r tests/requirements.txt
	touch $@

build-dev: venv
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/maturin develop --release -q

test-rust: redis
	cargo test --no-default-features -q

test-python: redis build-dev
	$(PY) -m pytest -q

test: test-rust test-python

demo: redis build-dev
	$(PY) examples/demo.py

format:
	cargo fmt --all

lint: build-dev
	$(PY) -m mypy.stubtest ferrolock._ferrolock
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --no-default-features --all-targets -- -D warnings

clean:
	cargo clean
	rm -rf $(VENV) python/ferrolock/*.so

# `make bench`: ferrolock beside redis-py, python-redis-lock and pottery, in one run
# against a throwaway redis-server; writes docs/benchmarks.md and docs/benchmarks.png.
# BENCH_ARGS=--quick for a ~1 minute run.
BENCH_REQS := benches/requirements.txt
BENCH_ARGS ?=

.PHONY: bench
bench: redis build-dev
	$(PY) -m pip install -q -r $(BENCH_REQS)
	$(PY) benches/bench.py $(BENCH_ARGS)

# `make chaos DURATION=600`: the history checker under faults (tests/history).
# Workers take locks in each scenario (lock, fair-lock, rwmutex, fair-rwmutex,
# multi-lock) while a nemesis kills connections, freezes workers past their
# ttl, restarts and stalls the server and sends Ctrl-C; the merged history is
# then checked. The scenarios share DURATION seconds. Prints a summary per
# scenario, writes them to target/history-summary.json, fails on any anomaly.
DURATION ?= 600

.PHONY: chaos
chaos: redis build-dev
	PYTHONPATH=tests $(PY) -m history --duration $(DURATION)
