"""`fimgate bench make-trace`: turn any git repository's history into a keystroke trace.

For each of the last N commits (merges skipped), every changed text file is replayed as a
person editing it: open the parent version, then for each changed run of lines from top to
bottom, jump there, delete what went away, and type what came in, one key at a time with a
human rhythm (log-normal gaps: median ~180 ms, p10 ~110 ms, p90 ~300 ms, as in flask-60), a
newline's indentation arriving as one auto-indent event, and a think pause between edits.
Very large insertions are pasted. Each file ends in a checkpoint whose sha1 must match the
committed file: the trace rebuilds the real history exactly or the command fails.
Format: ../shared/traces/README.md.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import random
import subprocess

TEXT_SUFFIXES = (
    ".py",
    ".js",
    ".ts",
    ".go",
    ".rs",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".java",
    ".rb",
    ".md",
    ".txt",
    ".toml",
    ".yaml",
    ".yml",
    ".json",
    ".sh",
    ".cfg",
    ".ini",
    ".rst",
    ".html",
    ".css",
    ".tsx",
    ".jsx",
    "Makefile",
)
MAX_FILE_BYTES = 200_000
PASTE_OVER_CHARS = 400  # longer insertions are pasted, not typed


class TraceBuildError(ValueError):
    pass


def _git(repo: str, *args: str) -> str:
    r = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise TraceBuildError(f"git {' '.join(args)}: {r.stderr.strip() or 'failed'}")
    return r.stdout


def _show(repo: str, rev: str, path: str) -> str | None:
    r = subprocess.run(["git", "-C", repo, "show", f"{rev}:{path}"], capture_output=True)
    if r.returncode != 0 or len(r.stdout) > MAX_FILE_BYTES:
        return None
    try:
        return r.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


class _Clock:
    def __init__(self, rng: random.Random) -> None:
        self.t = 0.0
        self.rng = rng

    def key(self) -> float:
        self.t += min(2000.0, math.exp(self.rng.gauss(math.log(180.0), 0.38)))
        return round(self.t)

    def pause(self, low_ms: float, high_ms: float) -> float:
        self.t += self.rng.uniform(low_ms, high_ms)
        return round(self.t)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def _type(events: list, clock: _Clock, path: str, cur: str, at: int, new: str) -> str:
    """Key events typing `new` at `at`; returns the resulting text."""
    if len(new) > PASTE_OVER_CHARS:
        events.append({"type": "insert", "file": path, "offset": at, "text": new, "t": clock.key()})
        return cur[:at] + new + cur[at:]
    i = 0
    while i < len(new):
        ch = new[i]
        if ch == "\n":
            j = i + 1
            while j < len(new) and new[j] in " \t":
                j += 1
            piece, auto = new[i:j], j > i + 1  # Enter, and the editor's auto-indent with it
        else:
            piece, auto = ch, False
        ev = {"type": "insert", "file": path, "offset": at, "text": piece, "t": clock.key()}
        if auto:
            ev["auto"] = True
        events.append(ev)
        cur = cur[:at] + piece + cur[at:]
        at += len(piece)
        i += len(piece)
    return cur


def edit_events(path: str, old: str, new: str, clock: _Clock) -> list[dict]:
    events: list[dict] = []
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    cur = old
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        at = sum(len(x) for x in b[:j1])  # everything above is already the new text
        line, col = _line_col(cur, at)
        events.append({"type": "move", "file": path, "offset": at, "line": line, "col": col, "t": clock.pause(600, 2500)})
        gone = "".join(a[i1:i2])
        if gone:
            events.append({"type": "delete", "file": path, "offset": at, "length": len(gone), "t": clock.key()})
            cur = cur[:at] + cur[at + len(gone) :]
        came = "".join(b[j1:j2])
        if came:
            cur = _type(events, clock, path, cur, at, came)
    if cur != new:
        raise TraceBuildError(f"{path}: replay does not rebuild the committed file")
    return events


def make_trace(
    repo: str, num_commits: int, seed: int = 0, max_files_per_commit: int = 4, suffixes: tuple[str, ...] = TEXT_SUFFIXES
) -> list[dict]:
    rng = random.Random(seed)
    clock = _Clock(rng)
    revs = _git(repo, "rev-list", "--no-merges", f"--max-count={num_commits}", "HEAD").split()
    events: list[dict] = []
    for rev in reversed(revs):
        parents = _git(repo, "rev-list", "--parents", "-n", "1", rev).split()[1:]
        if not parents:
            continue
        subject = _git(repo, "log", "-1", "--format=%s", rev).strip()
        changed = [line.split("\t") for line in _git(repo, "diff", "--name-status", parents[0], rev).splitlines()]
        files = [p[-1] for p in changed if p[0] == "M" and p[-1].endswith(suffixes)][:max_files_per_commit]
        if not files:
            continue
        events.append({"type": "commit", "commit": rev[:12], "subject": subject, "t": clock.pause(2000, 5000)})
        for path in files:
            old, new = _show(repo, parents[0], path), _show(repo, rev, path)
            if old is None or new is None or old == new:
                continue
            events.append(
                {"type": "open", "file": path, "commit": rev[:12], "text": old, "sha1": _sha(old), "t": clock.pause(1000, 3000)}
            )
            events.extend(edit_events(path, old, new, clock))
            events.append({"type": "checkpoint", "file": path, "sha1": _sha(new), "ok": True, "t": clock.pause(200, 800)})
    if not any(e["type"] == "checkpoint" for e in events):
        raise TraceBuildError(f"no text-file edits in the last {num_commits} commits of {repo}")
    return events


def write_trace(events: list[dict], out: str) -> None:
    import gzip

    opener = gzip.open if out.endswith(".gz") else open
    with opener(out, "wt", encoding="utf-8") as f:
        for ev in events:
            f.write(json.dumps(ev, ensure_ascii=False) + "\n")
