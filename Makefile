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
# BENCH_ARGS=--quick for a ~1 minute run; BENCH_ARGS="--baseline DIR" adds the
# figures of another build's ferrolock package (in DIR) beside this one's.
# strace (Debian package) counts the system calls of one cycle.
BENCH_REQS := benches/requirements.txt
BENCH_ARGS ?=

.PHONY: bench
bench: redis build-dev
	@command -v strace >/dev/null 2>&1 || { \
	  echo "installing strace (Debian package)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq strace >/dev/null; }
	$(PY) -m pip install -q -r $(BENCH_REQS)
	$(PY) benches/bench.py $(BENCH_ARGS)
