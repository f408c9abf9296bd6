"""Backends: the contract every engine fulfils, and the engines.

Here: the contract (`base.py`: FimPlan, ReuseHint, UsageReport, ... torch-free), what the embedded
and vLLM backends share (per-user block trees, keystroke pins, the "USER VALUE" pairs file) and the
main-thread runner servers hand compute to. Subpackages: `model/` (weights, tokenizers, the model
code), `embedded/` (the torch engine), `vllm/` (vLLM servers as the backend).
May import: fimgate.kernels. Never efim, gateway, lsp or bench.
"""
