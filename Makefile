# The same commands run locally and in CI (.ci/run calls `make lint` and `make test`).
SHELL := /bin/bash
.DEFAULT_GOAL := help
SERVERS := deployments/local/servers.sh
STACK := deployments/local/stack.sh
PYTEST_ARGS ?=

.PHONY: help install install-run dev dist test test-fast lint servers-up servers-down up down

help:
	@echo "make dev          the whole product in one process (SQLite, no server needed) on 127.0.0.1:8080"
	@echo "make test         install, start etcd + Kafka + FerretDB 2, run every test tier, stop the servers"
	@echo "make test-fast    the tests that need no server: unit, and the SQLite / in-process half of contract and integration"
	@echo "make lint         ruff and mypy (strict)"
	@echo "make up / down    the distributed stack as real processes (servers, API, 2 schedulers, executors, reaper)"
	@echo "make servers-up / servers-down   only etcd + Kafka + FerretDB 2, for running pytest by hand"
	@echo "make install      create .venv with the locked dependencies and the developers' tools (uv)"
	@echo "make install-run  create .venv with what the product runs on only (what make dev installs)"
	@echo "make dist         the wheel and its locked runtime requirements in dist/, to install without dev tools"

# Bytecode is compiled at install, as the container image does (UV_COMPILE_BYTECODE): a process start then
# loads it rather than compiling every module from source (PYTHONDONTWRITEBYTECODE keeps Python from caching it).
install:
	@command -v uv >/dev/null || python3 -m pip install -q --root-user-action=ignore uv
	uv sync --frozen --extra server --extra otel --compile-bytecode
	@.venv/bin/python -m compileall -q -j 0 services shared seed loadtest jobsched examples >/dev/null

# The product's runtime only (no test tools, linters or benchmark peers); --inexact keeps a developer's tools
# installed by `make install` rather than removing them.
install-run:
	@command -v uv >/dev/null || python3 -m pip install -q --root-user-action=ignore uv
	uv sync --frozen --extra server --no-dev --inexact --compile-bytecode
	@.venv/bin/python -m compileall -q -j 0 services shared jobsched examples >/dev/null

dev: install-run
	.venv/bin/jobsched dev

# What a production install takes (docs/operations.md): the wheel, and the lock's runtime requirements only.
DIST ?= dist
dist:
	@command -v uv >/dev/null || python3 -m pip install -q --root-user-action=ignore uv
	rm -rf $(DIST)
	uv build --wheel --out-dir $(DIST) -q
	uv export --frozen --no-dev --extra server --no-emit-project --no-hashes -q -o $(DIST)/requirements.txt

# Tests run TEST_WORKERS at a time, then those that stop a shared server alone (tests/run_all.sh).
TEST_WORKERS ?= 2
test: install
	@bash deployments/local/test-tools.sh
	@KAFKA_FRESH=1 bash $(SERVERS) start || { bash $(SERVERS) stop; exit 1; }; eval "$$(bash $(SERVERS) env)"; \
	  bash tests/run_all.sh $(TEST_WORKERS) $(PYTEST_ARGS); status=$$?; bash $(SERVERS) stop; exit $$status

test-fast: install
	@bash deployments/local/test-tools.sh
	.venv/bin/pytest -m "not servers and not e2e" $(PYTEST_ARGS)

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

servers-up:
	bash $(SERVERS) start
	@bash $(SERVERS) env

servers-down:
	bash $(SERVERS) stop

up: install
	bash $(STACK) up

down:
	bash $(STACK) down
