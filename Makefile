# UaC developer commands. `make help` lists them.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.DEFAULT_GOAL := help
.PHONY: help setup lint format typecheck test test-fast bench demo clean

help: ## Show the commands
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-10s %s\n", $$1, $$2}'

setup: $(STAMP) ## Create .venv and install UaC with its dev tools (pinned by constraints.txt)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

lint: setup ## ruff lint, ruff format check, import contracts
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: setup ## Apply ruff fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: setup ## mypy --strict
	$(BIN)/mypy schemas projections rules streams benchmarks scripts tests

test: lint typecheck ## Everything CI runs: static checks, unit, contract, component and integration tests (starts its own Kafka)
	$(BIN)/pytest

test-fast: setup ## Unit and contract tests only (no broker)
	$(BIN)/pytest -m "not integration"

bench: setup ## Benchmarks: fold replay, FHIR import, drug knowledge reading, rules by active prescriptions, ClickHouse sink, state table writes, collector pauses, end-to-end pipeline (print figures; not tests)
	$(BIN)/python -m benchmarks.replay_throughput
	$(BIN)/python -m benchmarks.fhir_import
	$(BIN)/python -m benchmarks.knowledge_resolution
	$(BIN)/python -m benchmarks.rules_scaling
	$(BIN)/python -m benchmarks.sink_throughput
	$(BIN)/python -m benchmarks.state_writes
	$(BIN)/python -m benchmarks.collector_pauses
	$(BIN)/python -m benchmarks.pipeline_throughput

demo: setup ## The main job on embedded defaults (sample events, state, alerts)
	$(BIN)/uac demo

clean: ## Remove local state (.uac) and caches
	rm -rf .uac .mypy_cache .ruff_cache .hypothesis
