# SOLboard: `make run` serves the site with a local runner; `make test` runs the whole suite.
# Defaults need no external service (SQLite + an embedded broker under var/); set DATABASE_URL /
# CELERY_BROKER_URL to use PostgreSQL / Redis (see README.md).

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
# The runner's jobs run $(VENV)'s interpreter as an unprivileged job user, so take the first
# python3.11 (else python3) on the PATH that every user can execute: a pyenv build under a 0700
# /root is not one, and the jail would refuse every job ("Permission denied"). None: the first found.
BOOTSTRAP_PYTHON ?= $(shell for p in $$(which -a python3.11 python3 2>/dev/null); do \
    $$p -c 'import os, sys, pathlib; q = pathlib.Path(os.path.realpath(sys.executable)); sys.exit(not all(p.stat().st_mode & 0o001 for p in [q, *q.parents]))' 2>/dev/null \
    && { echo $$p; exit; }; done; command -v python3.11 2>/dev/null || command -v python3)
# Written after a successful install; rebuilt only when pyproject.toml changes.
STAMP := $(VENV)/.solboard-setup
PYTEST_ARGS ?=

.PHONY: help setup run test lint typecheck

help:
	@echo "make setup      create $(VENV) and install SOLboard with the runner and dev extras (idempotent)"
	@echo "make run        migrate, sync, then web on PORT (default 8000) + site worker + local runner"
	@echo "make test       the whole test suite (PYTEST_ARGS=... to narrow it)"
	@echo "make lint       ruff"
	@echo "make typecheck  mypy"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || { echo "creating $(VENV) with $(BOOTSTRAP_PYTHON)"; $(BOOTSTRAP_PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --quiet -e '.[runner,dev]'
	@touch $@

run: setup
	$(VENV)/bin/solboard dev

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .

typecheck: setup
	$(VENV)/bin/mypy leaderboard evaluator runners solboard_common solboard_client
