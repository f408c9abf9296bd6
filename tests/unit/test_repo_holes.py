"""Repository-level holes from real git history (a small repository made here), and the context
a client would send with them."""

import subprocess

import pytest

from fimgate.bench.quality.repo import anchored_with, identifiers_match, parse_row
from fimgate.bench.workloads.repo_holes import Repo, definitions, imported_names, mine_holes
from fimgate.efim.templates import ContextChunk

UTIL = 'def clamp(value, low, high):\n    """Keep value within [low, high]."""\n    return max(low, min(value, high))\n'
APP = 'from .util import clamp\n\n\ndef scale(x):\n    """Scale x."""\n    return x * 2\n'
APP_2 = (
    'from .util import clamp\n\n\ndef scale(x):\n    """Scale x.\n\n    Uses clamp to bound it.\n    """\n'
    "    y = clamp(x, 0, 10)\n    return y * 2\n"
)


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "r"
    (root / "pkg").mkdir(parents=True)
    _git(root.parent, "init", "-q", "-b", "main", str(root))
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    (root / "pkg" / "util.py").write_text(UTIL)
    (root / "pkg" / "app.py").write_text(APP)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "one")
    (root / "pkg" / "app.py").write_text(APP_2)
    (root / "pkg" / "util.py").write_text(UTIL + "\n\ndef wrap(value, size):\n    return value % size\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "two")
    return root


def test_a_line_using_an_imported_name_is_a_hole_with_its_context(repo):
    holes = mine_holes(Repo(str(repo)), limit=10)
    assert len(holes) == 1  # the docstring line that names clamp is prose, not a hole
    h = holes[0]
    assert h.path == "pkg/app.py" and h.answer == "y = clamp(x, 0, 10)" and h.cross_file_names == ("clamp",)
    assert h.prefix.endswith('    """\n    ') and h.suffix == "\n    return y * 2\n"
    # the imported definition first (stable), then the lines around the commit's edit of util.py
    assert [c.path for c in h.context] == ["pkg/util.py", "pkg/util.py"]
    assert h.context[0].text.startswith("def clamp(value, low, high):")
    assert "def wrap(value, size):" in h.context[1].text


def test_a_bundle_is_read_like_a_repository(repo, tmp_path):
    bundle = tmp_path / "r.bundle"
    _git(repo, "bundle", "create", str(bundle), "main")
    assert [h.answer for h in mine_holes(Repo(str(bundle)), limit=10)] == ["y = clamp(x, 0, 10)"]


def test_definitions_and_imports():
    assert definitions("X = 1\nclass A:\n    def f(self):\n        pass\nasync def g():\n    pass\n") == {
        "X": 0,
        "A": 1,
        "f": 2,
        "g": 4,
    }
    files = {"pkg/util.py": "", "pkg/__init__.py": "", "pkg/sub/mod.py": ""}
    text = "from .util import (\n    clamp,\n    wrap as w,\n)\nfrom pkg.sub.mod import thing\nfrom os import path\n"
    assert imported_names(text, "pkg/app.py", files) == {"clamp": "pkg/util.py", "w": "pkg/util.py", "thing": "pkg/sub/mod.py"}


def test_rows_and_context_changes():
    assert parse_row("reuse-add:0.3") == ("reuse-add", 0.3) and parse_row("context") == ("context", None)
    for bad in ("context:0.2", "reuse-add:2", "psm"):
        with pytest.raises(ValueError):
            parse_row(bad)
    a, b, c, x = (ContextChunk(n, n) for n in "abcx")
    assert anchored_with("add", (a, b, c), x) == (a, b)
    assert anchored_with("add-visited", (a, b, c), x) == (a, b) and parse_row("reuse-add-visited")[0] == "reuse-add-visited"
    assert anchored_with("drop", (a, b, c), x) == (x, a, b, c)
    assert anchored_with("reorder", (a, b, c), x) == (c, b, a)
    assert identifiers_match("y = clamp(x, 0, 10)", "y = clamp(x,0,10)") and not identifiers_match("y = wrap(x)", "y = clamp(x)")
