"""The request log (`--request-log`): a line per request, written when it ends, with its timing and
cost and never its text; and how `bench editor` reads it to say why a key showed nothing."""

import json
import time

from fimgate.backend.base import Finished, TextDelta, UsageReport
from fimgate.bench.editor.key_timeline import timeline
from fimgate.gateway.request_log import RequestLog, read_log


def _events(text: str, cancelled: bool = False):
    yield TextDelta(text)
    yield Finished(text, UsageReport(prompt_tokens=9, prefilled_tokens=4, cancelled=cancelled))


def test_a_line_per_request_with_its_cost_and_never_its_text(tmp_path):
    path = tmp_path / "requests.jsonl"
    log = RequestLog(str(path))
    assert [type(e) for e in log.watch(_events("secret_token()"), ("alice", "file:///a.py"), "typing")] == [TextDelta, Finished]
    stream = log.watch(_events("x"), ("bob", "b.py"), "typing")
    time.sleep(0.05)  # read later than it was made: timed from when it was made
    next(stream)
    stream.close()  # the client went away before it finished
    lines = read_log(str(path))
    assert [line["kind"] for line in lines] == ["typing", "typing"]
    assert lines[0]["usage"]["prefilled_tokens"] == 4 and lines[0]["chars"] == len("secret_token()")
    assert lines[0]["first_text_ms"] is not None and lines[0]["end_ms"] >= lines[0]["first_text_ms"]
    assert lines[1]["closed"] and lines[1]["usage"] is None and lines[1]["first_text_ms"] >= 50
    raw = path.read_text()
    assert "secret_token" not in raw and "alice" not in raw and "a.py" not in raw
    assert lines[0]["session"] != lines[1]["session"]


def test_session_names_cannot_be_recomputed_and_the_file_is_bounded(tmp_path):
    """The log named sessions sha256(user NUL document)[:8], which anyone could recompute, and grew
    without bound (~45 KB/s at ~90 requests/s)."""
    import hashlib

    path = tmp_path / "requests.jsonl"
    log = RequestLog(str(path), max_bytes=20_000)
    for i in range(400):
        list(log.watch(_events("x"), ("alice", f"d{i % 3}.py"), "typing"))
    names = {line["session"] for line in read_log(str(path))}
    assert len(names) == 3
    assert hashlib.sha256(b"alice\0d0.py").hexdigest()[:8] not in {n[:8] for n in names}
    assert path.stat().st_size < 20_000 + 2_000 and (tmp_path / "requests.jsonl.1").stat().st_size < 20_000 + 2_000
    assert len(list(tmp_path.iterdir())) == 2  # the log and one rotated file, no more
    other = RequestLog(str(tmp_path / "other.jsonl"))  # another server: another secret
    assert other.session_name(("alice", "d0.py")) != log.session_name(("alice", "d0.py"))


def test_a_key_with_no_ghost_text_gets_the_reason_the_server_saw():
    at = 1_000_000.0  # the key times (ms) and the log (s) share the wall clock
    keys = [
        {"at": at, "window_ms": 200, "shown_ms": None},  # nothing arrived
        {"at": at + 200, "window_ms": 200, "shown_ms": None},  # arrived, first text after the next key
        {"at": at + 400, "window_ms": 200, "shown_ms": None},  # answered in time with nothing
        {"at": at + 600, "window_ms": 200, "shown_ms": 60},  # shown
    ]

    def req(t_ms, first, end, chars, cancelled=False):
        usage = {"prefilled_tokens": 500, "cancelled": cancelled}
        return {"at": t_ms / 1000, "kind": "typing", "first_text_ms": first, "end_ms": end, "chars": chars, "usage": usage}

    log = [
        {"at": (at + 10) / 1000, "kind": "warmup", "first_text_ms": None, "end_ms": 5, "chars": 0, "usage": {}},
        req(at + 250, None, 170, 0, cancelled=True),
        req(at + 450, None, 30, 0),
        req(at + 620, 30, 40, 5),
    ]
    t = timeline(keys, json.loads(json.dumps(log)))
    assert [k.get("why_none") for k in t["per_key"]] == ["no request", "late", "empty", None]
    assert t["why_none"] == {"no request": 1, "late": 1, "empty": 1, "not drawn": 0}
    assert t["asked_share"] == 0.75 and t["asked_p50_ms"] == 50.0
    assert t["late_prefilled_p50"] == 500
    assert t["asked_shown_p50_ms"] == 60.0  # the one key shown from a request
