# cdcflow developer commands. `make` (or `make help`) lists them.
# Needs: Python 3.11, Java 17, Maven and Rust's cargo (rustup) on PATH. Everything else is installed by these targets
# (Python packages from the lock file, Kafka/HBase jars via Maven, MariaDB and the tests' chromium via apt when root).

SHELL := /bin/bash
PYTHON ?= python3.11
UV_VERSION := 0.13.8
UV := .tools/bin/uv
VENV := .venv
BIN := $(VENV)/bin
export UV_PYTHON_DOWNLOADS := never
# rustup installs cargo here; a shell that did not source ~/.cargo/env still finds it.
export PATH := $(HOME)/.cargo/bin:$(PATH)
export UV_PROJECT_ENVIRONMENT := $(VENV)

.DEFAULT_GOAL := help
.PHONY: help install wheel browser run test soak unit integration lint docs fmt stack-up stack-down stack-status protos clean

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(UV):
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is required"; exit 1; }
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(BIN)/cdcflow: $(UV) pyproject.toml uv.lock native/Cargo.toml native/Cargo.lock src/cdcflow/_native.pyi $(wildcard native/src/*.rs)
	@command -v cargo >/dev/null || { echo "Rust's cargo is required to build native/ (https://rustup.rs, or apt-get install cargo)"; exit 1; }
	$(UV) sync --frozen --python $(PYTHON)
	@touch $@

install: $(BIN)/cdcflow ## Install cdcflow and its pinned dependencies into .venv (from uv.lock)
	@command -v java >/dev/null || { echo "Java 17 is required (apt-get install openjdk-17-jdk-headless)"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is required (apt-get install maven)"; exit 1; }

wheel: $(UV) ## Build the wheel (the Python package with its compiled hot path) into dist/: pip install dist/cdcflow-*.whl
	$(UV) build --wheel --out-dir dist

browser: ## Debian's chromium, the headless browser of the status page's test (apt-get when root)
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y chromium \
	    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }; \
	  else echo "the tests need chromium: sudo apt-get install chromium"; exit 1; fi; }

run: install ## Start the local stack (Kafka, HBase, MariaDB) and run cdcflow with the bundled config
	$(BIN)/cdcflow run

test: install lint browser ## Everything: lint, type checks, unit + integration + e2e tests on real services (two lanes: the Spark tests beside the rest)
	$(BIN)/pytest -n 2

soak: install browser ## The long randomized tests at full size (CDCFLOW_SOAK=1; 100k HBase mutations, a 1M-row snapshot, a 1.4M-cell HBase backfill, 1M fuzzed peer frames, Phoenix SIGKILLs, an HBase restart under Phoenix and the peer, 1,500 steps of rows and DDL with pipeline SIGKILLs, Kafka nodes SIGKILLed and leaders moved under the captures and the pipeline on a three-node cluster, regions moved, split, merged, balanced and drained, a region server SIGKILLed and cdcflow instances killed on a distributed HBase on HDFS)
	CDCFLOW_SOAK=1 $(BIN)/pytest -m "e2e or fuzz"

unit: install ## Unit tests only (no servers, seconds)
	$(BIN)/pytest -m unit

integration: install browser ## Integration tests only (starts the real services once per session)
	$(BIN)/pytest -n 2 -m "integration or e2e"

docs: install ## Regenerate docs/configuration.md from the config model (a unit test fails when it is stale)
	$(BIN)/python -m cdcflow.config.reference > docs/configuration.md

lint: install ## ruff (lint + format check), mypy --strict, and the layout's import rules (import-linter)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

fmt: install ## Format and auto-fix
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

stack-up: install ## Start the dev stack (idempotent)
	$(BIN)/cdcflow stack up

stack-down: install ## Stop the dev stack
	$(BIN)/cdcflow stack down

stack-status: install ## Where each service listens, and whether it answers
	$(BIN)/cdcflow stack status

protos: install ## Regenerate the hbase.pb Python modules from src/cdcflow/protocols/hbase/pb/*.proto
	$(BIN)/python -m grpc_tools.protoc -Isrc --python_out=src --pyi_out=src src/cdcflow/protocols/hbase/pb/*.proto

clean: ## Remove the virtualenvs and caches of this checkout (not the download cache)
	rm -rf .venv .tools .mypy_cache .ruff_cache .pytest_cache .hypothesis
