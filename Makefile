# The same commands run locally and in CI (.ci/run calls `make test`).
SHELL := /bin/bash
.DEFAULT_GOAL := help
SERVERS := deployments/local/servers.sh
PYTEST_ARGS ?=

.PHONY: help install test test-unit lint servers-up servers-down

help:
	@echo "make install      create .venv with the locked dependencies (uv)"
	@echo "make test         install, start etcd + Kafka + FerretDB, run every test tier, stop the servers"
	@echo "make test-unit    the fast tier only: no server needed"
	@echo "make lint         ruff and mypy"
	@echo "make servers-up / servers-down   the local real servers, for running pytest by hand"

install:
	@command -v uv >/dev/null || python3 -m pip install -q --root-user-action=ignore uv
	uv sync --frozen

test: install
	@bash $(SERVERS) start || { bash $(SERVERS) stop; exit 1; }; eval "$$(bash $(SERVERS) env)"; \
	  .venv/bin/pytest $(PYTEST_ARGS); status=$$?; bash $(SERVERS) stop; exit $$status

test-unit: install
	.venv/bin/pytest -m unit $(PYTEST_ARGS)

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

servers-up:
	bash $(SERVERS) start
	@bash $(SERVERS) env

servers-down:
	bash $(SERVERS) stop

.PHONY: up down
STACK := deployments/local/stack.sh

up: install
	bash $(STACK) up

down:
	bash $(STACK) down
