# One command per task. Every target creates and uses the local virtual environment.
# Debian's python3 is built with profile-guided and link-time optimization; a python3 built
# by pyenv without --enable-optimizations (the default) used about 15 % more CPU on the same work here
# (docs/decisions.md). Use it when it can make a virtual environment; PY=... overrides.
PY ?= $(shell /usr/bin/python3 -c 'import sys, ensurepip; assert sys.version_info >= (3, 11)' \
        2>/dev/null && echo /usr/bin/python3 || echo python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA ?= .quire/hub
PORT ?= 8470

.PHONY: setup pyc run test test-fast lint demo clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# Byte-compile the project's modules. Every `quire` process imports ~60 of them; without
# .pyc files (PYTHONDONTWRITEBYTECODE set, as it is in our sessions' shells, or a fresh checkout) each
# process compiles them from source: ~50-60 ms of CPU a command measured, thousands of
# times in the suite. A stale .pyc is only ignored (Python checks the source's mtime).
pyc: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 hub replica shared >/dev/null

run: $(STAMP) pyc  ## set up, initialize an embedded SQLite hub on first run, serve on 127.0.0.1
	@if [ ! -f $(DATA)/hub_key.pem ]; then $(BIN)/quire hub init --data $(DATA) --public-url http://127.0.0.1:$(PORT) --serving; \
	else echo "hub already initialized in $(DATA) (new owner code: $(BIN)/quire hub enroll --data $(DATA))"; fi
	$(BIN)/quire hub serve --data $(DATA) --host 127.0.0.1 --port $(PORT)

# three workers, one file each (a file's tests share module fixtures); most end-to-end time
# is spent waiting on hub and CLI processes. The longest files are handed out first
# (tests/conftest.py LONG_FILES), not the files with the most tests. Files and the tests in each run in a shuffled
# order (pytest-randomly); the seed is printed before and after: replay with SEED=<seed>
TEST_WORKERS ?= 3
SEED := $(or $(SEED),$(shell od -An -N4 -tu4 /dev/urandom | tr -d ' '))
test: $(STAMP) pyc  ## the whole suite (unit, in-process API, end-to-end; SQLite and PostgreSQL)
	@echo "test order: --randomly-seed=$(SEED) (replay: make test SEED=$(SEED))"
	@$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -p randomly --randomly-seed=$(SEED); \
	rc=$$?; echo "test order was --randomly-seed=$(SEED) (replay: make test SEED=$(SEED))"; \
	exit $$rc

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"

# ruff over the code, its tests and the benchmarks; mypy over every module of shared/, hub/
# and replica/, strict for shared/ and replica/ (pyproject.toml, [tool.mypy]). mypy
# keeps what it learned in .mypy_cache: the first run (a fresh clone, as in CI) reads the
# third-party packages' types too and takes about a minute, a run after a change seconds
lint: $(STAMP)
	$(BIN)/ruff check hub replica shared tests bench
	$(BIN)/mypy shared hub replica

demo: $(STAMP)
	$(BIN)/quire demo

# bench, bench-quick and bench-deps (pouchdb-server from npm) live with the benchmarks
bench bench-quick: $(STAMP) pyc
include bench/Makefile.inc

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
