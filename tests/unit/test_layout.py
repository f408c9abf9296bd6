"""The package layout the folders' docstrings describe: imports run one way
(lsp, gateway -> efim -> backend -> kernels), efim and the backend contract stay torch-free."""

from __future__ import annotations

import ast

from fimgate.bench.common.checkout import PACKAGE_DIR

# package -> the fimgate packages its modules may import (besides itself)
ALLOWED = {
    "fimgate.kernels": set(),
    "fimgate.backend": {"fimgate.kernels"},
    "fimgate.backend.model": {"fimgate.backend", "fimgate.kernels"},
    "fimgate.backend.embedded": {"fimgate.backend", "fimgate.backend.model", "fimgate.kernels"},
    "fimgate.backend.vllm": {"fimgate.backend"},
    "fimgate.efim": {"fimgate.backend"},
    "fimgate.gateway": {
        "fimgate.efim",
        "fimgate.backend",
        "fimgate.backend.model",
        "fimgate.backend.embedded",
        "fimgate.backend.vllm",
    },
    "fimgate.lsp": {"fimgate.gateway", "fimgate.efim", "fimgate.backend", "fimgate.backend.model", "fimgate.backend.embedded"},
}
TORCH_FREE = ("fimgate.efim", "fimgate.backend.base", "fimgate.gateway.protocol")


def _modules():
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = ".".join(parts[:-1])
        yield name, package, ast.parse(path.read_text(encoding="utf-8"))


def _imports(tree) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _package_of(module: str) -> str:
    """The layout package a fimgate module belongs to (the longest ALLOWED key it is under)."""
    keys = [k for k in ALLOWED if module == k or module.startswith(k + ".")]
    return max(keys, key=len) if keys else module


def test_imports_run_one_way():
    wrong = []
    for name, package, tree in _modules():
        own = _package_of(name if package == name else package)
        if own not in ALLOWED:
            continue  # fimgate.cli and fimgate.bench may import anything
        for imported in _imports(tree):
            if imported.startswith("fimgate.") and _package_of(imported) not in ALLOWED[own] | {own}:
                wrong.append(f"{name} imports {imported}")
    assert wrong == []


def test_the_contract_and_the_planner_import_no_torch():
    heavy = [
        (name, imp)
        for name, _, tree in _modules()
        if name.startswith(TORCH_FREE)
        for imp in _imports(tree)
        if imp.split(".")[0] in ("torch", "numpy")
    ]
    assert heavy == []


def test_every_folder_says_what_it_holds_and_may_import():
    for init in sorted(PACKAGE_DIR.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{init.relative_to(PACKAGE_DIR.parent)} has no docstring worth the name"


def test_no_folder_holds_more_than_15_modules_side_by_side():
    """A newcomer finds a command's files together: a folder over 15 modules gets sub-folders."""
    crowded = {}
    for folder in [PACKAGE_DIR, *(p for p in PACKAGE_DIR.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > 15:
            crowded[str(folder.relative_to(PACKAGE_DIR.parent))] = len(modules)
    assert crowded == {}
