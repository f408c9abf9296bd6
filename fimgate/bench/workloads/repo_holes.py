"""Holes from a real repository's history whose answer needs another file (the RepoBench and
CrossCodeEval idea), and the context an editor client would have sent with them.

Walking first-parent commits newest first, in each modified Python file: a line the commit added
that uses a name the file imports from a module of the same repository (a function, class or
module-level name defined there at that commit). One hole per file and commit. The hole is the
line after its indentation; the cursor is where that text starts; the file after the line is the
suffix (the file as it is at the commit, so the rest of the change is visible, as it would be to
someone editing that line).

Context, as clients gather it (llama.vscode's ring, Continue's imported definitions), within a
character budget, stable chunks first:
- imports: for each in-repository module the file imports names from, the first lines of those
  names' definitions there (signature, docstring start);
- recently edited: the lines around the first change of each other Python file the same commit
  changed (the author had just been there).
"""

from __future__ import annotations

import builtins
import io
import keyword
import os
import re
import subprocess
import tempfile
import tokenize
from dataclasses import dataclass

from fimgate.efim.templates import ContextChunk

DEFINITION = re.compile(r"^(?:[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)|[ \t]*class[ \t]+(\w+)|(\w+)[ \t]*(?::[^=\n]*)?=)", re.M)
FROM_IMPORT = re.compile(r"^from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
IDENT = re.compile(r"[A-Za-z_]\w*")
COMMON = set(keyword.kwlist) | set(dir(builtins)) | {"self", "cls"}
DEFINITION_LINES = 6  # lines of each imported definition shown (signature, docstring start)
RADIUS_LINES = 12  # lines around a recent edit
PER_COMMIT = 2  # holes from one commit at most (a sweeping change would fill the set)


@dataclass(frozen=True)
class RepoHole:
    commit: str
    path: str
    prefix: str  # the file up to the cursor
    suffix: str  # from the end of the hole's line
    answer: str  # the line's text after its indentation
    context: tuple[ContextChunk, ...]
    cross_file_names: tuple[str, ...]  # the imported names the line uses


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


class Repo:
    """A git repository read at any commit (file texts cached by blob id)."""

    def __init__(self, path: str) -> None:
        if path.endswith(".bundle"):
            self._tmp = tempfile.TemporaryDirectory(prefix="fimgate-repo-")
            heads = _git(os.path.dirname(path) or ".", "bundle", "list-heads", os.path.abspath(path)).split()
            branch = next((h.rsplit("/", 1)[-1] for h in heads if h.startswith("refs/heads/")), None)
            args = ["clone", "-q", *(["-b", branch] if branch else []), os.path.abspath(path), self._tmp.name]
            subprocess.run(["git", *args], check=True, capture_output=True)
            path = self._tmp.name
        self.path = path
        self._blobs: dict[str, str] = {}
        _git(path, "rev-parse", "HEAD")  # a clear error for something that is not a repository

    def commits(self, n: int) -> list[str]:
        return _git(self.path, "rev-list", "--first-parent", "-n", str(n), "HEAD").split()

    def python_files(self, commit: str) -> dict[str, str]:
        """path -> blob id of every Python file at `commit`."""
        out = {}
        for line in _git(self.path, "ls-tree", "-r", commit).splitlines():
            meta, path = line.split("\t", 1)
            if path.endswith(".py"):
                out[path] = meta.split()[2]
        return out

    def blob(self, blob_id: str) -> str:
        if blob_id not in self._blobs:
            self._blobs[blob_id] = _git(self.path, "cat-file", "-p", blob_id)
        return self._blobs[blob_id]

    def added_lines(self, commit: str) -> dict[str, list[int]]:
        """Modified Python files -> the 0-based line numbers (in the new file) the commit added."""
        diff = _git(self.path, "diff", "-U0", "--no-renames", "--diff-filter=M", f"{commit}~1", commit, "--", "*.py")
        out: dict[str, list[int]] = {}
        path, line = None, 0
        for row in diff.splitlines():
            if row.startswith("+++ "):
                path = row[6:] if row.startswith("+++ b/") else None
            elif row.startswith("@@") and path:
                m = re.match(r"@@ -\S+ \+(\d+)", row)
                line = int(m.group(1)) - 1
            elif row.startswith("+") and path:
                out.setdefault(path, []).append(line)
                line += 1
        return out


def definitions(text: str) -> dict[str, int]:
    """Names a module defines (def, class, module-level assignment) -> the line of the first one."""
    out: dict[str, int] = {}
    for m in DEFINITION.finditer(text):
        name = m.group(1) or m.group(2) or m.group(3)
        out.setdefault(name, text.count("\n", 0, m.start()))
    return out


def resolve(module: str, importer: str, files: dict[str, str]) -> str | None:
    """The repository file a `from MODULE import` in `importer` refers to, if it is one."""
    if module.startswith("."):
        dots = len(module) - len(module.lstrip("."))
        base = os.path.dirname(importer)
        for _ in range(dots - 1):
            base = os.path.dirname(base)
        stem = "/".join(p for p in [base, *module.lstrip(".").split(".")] if p)
        candidates = [stem + ".py", stem + "/__init__.py"]
    else:
        tail = module.replace(".", "/")
        candidates = [
            p for p in files if p.endswith("/" + tail + ".py") or p == tail + ".py" or p.endswith("/" + tail + "/__init__.py")
        ]
    return next((c for c in candidates if c in files), None)


def imported_names(text: str, path: str, files: dict[str, str]) -> dict[str, str]:
    """Names `text` imports from modules of the repository -> the module's file."""
    out = {}
    for m in FROM_IMPORT.finditer(text):
        target = resolve(m.group(1), path, files)
        if target is None or target == path:
            continue
        for part in m.group(2).strip("()").replace("\n", " ").split(","):
            words = part.split("#", 1)[0].split()
            if words:
                out[words[-1]] = target  # "a as b" binds b
    return out


def string_lines(text: str) -> set[int]:
    """0-based lines inside multi-line strings (docstrings): prose, not code to complete."""
    inside: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0] - 1, tok.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    return inside


def _lines(text: str, first: int, count: int) -> str:
    return "\n".join(text.split("\n")[max(0, first) : max(0, first) + count])


def gather_context(
    repo: Repo, commit: str, path: str, text: str, files: dict[str, str], budget_chars: int
) -> tuple[ContextChunk, ...]:
    """Imported definitions (stable, first), then the commit's other edits, within the budget."""
    imports: dict[str, list[str]] = {}
    for name, target in imported_names(text, path, files).items():
        where = definitions(repo.blob(files[target])).get(name)
        if where is not None:
            imports.setdefault(target, []).append(_lines(repo.blob(files[target]), where, DEFINITION_LINES))
    chunks = [ContextChunk(t, "\n\n".join(defs)) for t, defs in imports.items()]
    for other, lines in repo.added_lines(commit).items():
        if other != path and other in files:
            chunks.append(ContextChunk(other, _lines(repo.blob(files[other]), lines[0] - RADIUS_LINES, 2 * RADIUS_LINES + 1)))
    kept, used = [], 0
    for c in chunks:  # in order: what does not fit is left out
        if used + len(c.text) <= budget_chars:
            kept.append(c)
            used += len(c.text)
    return tuple(kept)


def mine_holes(repo: Repo, limit: int, max_commits: int = 301, budget_chars: int = 3000) -> list[RepoHole]:
    holes: list[RepoHole] = []
    for commit in repo.commits(max_commits)[:-1]:  # the oldest has no parent to diff with
        added = repo.added_lines(commit)
        if not added:
            continue
        files = repo.python_files(commit)
        taken = 0
        for path, lines in sorted(added.items()):
            if path not in files:
                continue
            text = repo.blob(files[path])
            imported = imported_names(text, path, files)
            own = definitions(text)
            rows = text.split("\n")
            prose = string_lines(text)
            for n in lines:
                line = rows[n] if n < len(rows) and n not in prose else ""
                body = line.strip()
                if not 8 <= len(body) <= 120 or body.startswith(("#", "import ", "from ", '"', "'", "@")):
                    continue
                names = tuple(dict.fromkeys(w for w in IDENT.findall(body) if w in imported and w not in own and w not in COMMON))
                if not names:
                    continue
                start = sum(len(r) + 1 for r in rows[:n])
                cursor = start + len(line) - len(line.lstrip())
                end = start + len(line)
                context = gather_context(repo, commit, path, text, files, budget_chars)
                holes.append(RepoHole(commit, path, text[:cursor], text[end:], body, context, names))
                taken += 1
                break  # one hole per file and commit
            if len(holes) >= limit:
                return holes
            if taken >= PER_COMMIT:
                break
    return holes
