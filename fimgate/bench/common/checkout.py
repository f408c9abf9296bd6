"""Where the source checkout and its sibling `../shared` are, for benchmarks run from a clone.

CHECKOUT/               the repository (or, installed from a wheel, site-packages' parent)
  fimgate/              PACKAGE_DIR
CHECKOUT/../shared/     SHARED (traces, HumanEval, repositories; $FIMGATE_SHARED overrides)
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[2]
CHECKOUT = PACKAGE_DIR.parent
SHARED = Path(os.environ.get("FIMGATE_SHARED") or CHECKOUT.parent / "shared")


def package_sources() -> list[Path]:
    """fimgate's own Python files, in a fixed order: real code to benchmark and test on."""
    return sorted(PACKAGE_DIR.rglob("*.py"))
