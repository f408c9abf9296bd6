"""make-trace rebuilds a real git history exactly, as keystrokes."""

import subprocess

import pytest

from fimgate.bench.workloads.make_trace import TraceBuildError, make_trace
from fimgate.bench.workloads.trace import debounced_requests


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_trace_from_a_repository_replays_to_the_committed_files(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.invalid")
    _git(repo, "config", "user.name", "t")
    f = repo / "app.py"
    f.write_text("def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    f.write_text(
        "def add(a, b):\n    \"\"\"Sum.\"\"\"\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\nprint(add(1, 2))\n"
    )
    _git(repo, "commit", "-qam", "second")
    events = make_trace(str(repo), 5)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "commit" and "open" in kinds and kinds[-1] == "checkpoint"
    assert all(b["t"] >= a["t"] for a, b in zip(events, events[1:]))
    assert any(e.get("auto") for e in events)  # Enter + indentation arrives as one auto-indent event
    requests = list(debounced_requests(events, 150.0))  # raises if a checkpoint does not match
    assert requests and requests[-1].text == f.read_text()
    with pytest.raises(TraceBuildError):  # only the files asked for: none here
        make_trace(str(repo), 5, suffixes=(".rs",))


def test_a_repository_without_edits_is_a_clear_error(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    with pytest.raises(TraceBuildError):
        make_trace(str(repo), 5)
