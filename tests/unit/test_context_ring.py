"""Replayed people send the context the VS Code extension would: chunks of the files they left."""

from fimgate.bench.workloads.context_ring import with_context
from fimgate.bench.workloads.trace import TraceRequest


def _req(i, file, text, cursor):
    return TraceRequest(index=i, t_ms=i * 100.0, file=file, text=text, cursor=cursor, next_event_ms=None, typed_next="")


A = "\n".join(f"a{i} = {i}" for i in range(100))
B = "\n".join(f"b{i} = {i}" for i in range(10))


def test_leaving_a_file_adds_the_lines_around_its_cursor_oldest_first():
    part = [
        _req(0, "a.py", A, A.index("a50")),
        _req(1, "b.py", B, 0),
        _req(2, "b.py", B, 3),
        _req(3, "c.py", "x", 0),
        _req(4, "a.py", A, A.index("a50")),
    ]
    got = with_context(part, 10_000)
    assert got[0].context == () and got[1].context == got[2].context
    assert [c.path for c in got[1].context] == ["a.py"]
    assert got[1].context[0].text.startswith("a34 = 34\n") and got[1].context[0].text.endswith("a66 = 66")
    assert [c.path for c in got[3].context] == ["a.py", "b.py"]  # oldest first
    assert [c.path for c in got[4].context] == ["b.py", "c.py"]  # a.py's own chunk stays out
    assert with_context(part, 0) == part


def test_the_ring_keeps_the_newest_within_its_budget():
    part = [_req(i, f"f{i}.py", str(i) * 40, 0) for i in range(4)] + [_req(4, "g.py", "y", 0)]
    got = with_context(part, 100)
    assert [c.path for c in got[-1].context] == ["f2.py", "f3.py"]
