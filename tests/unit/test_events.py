"""Acceptance events: counted once, only for the user the answer went to, never holding code."""

from prometheus_client import CollectorRegistry, generate_latest

from fimgate.backend.base import UsageReport
from fimgate.gateway.events import Events, _Open, fate, latency_bucket, line_digest, reuse_of


def _events():
    reg = CollectorRegistry()
    return Events(reg, remembered=3), reg


def test_events_count_once_per_answer_and_only_for_its_user():
    ev, reg = _events()
    ev.answered("c1", "ana", "python", UsageReport(100, prefix_cached_tokens=99, total_ms=80), "return a + b")
    assert ev.record("ana", "view", "c1", None, None)
    assert ev.record("ana", "view", "c1", None, None)  # shown twice (re-triggered): once
    assert not ev.record("bo", "select", "c1", None, None)  # not bo's completion: refused, not counted
    assert ev.record("ana", "select", "c1", "word", 5)
    s = ev.summary("ana")
    assert s["total"] == {"shown": 1, "accepted": 1, "accepted_chars": 5, "dismissed": 0, "acceptance_rate": 1.0}
    assert s["by_language"]["python"]["accepted"] == 1
    assert ev.summary("bo")["total"]["shown"] == 0
    assert list(ev.everyone()["users"]) == ["ana"]
    text = generate_latest(reg).decode()
    assert (
        'fimgate_suggestions_accepted_total{kind="word",language="python",latency="<100ms",reuse="prefix",source="reported"} 1.0'
        in text
    )


def test_unknown_forgotten_and_empty_answers_take_no_events():
    ev, _ = _events()
    ev.answered("empty", "ana", "python", UsageReport(10), "  ")
    ev.answered("cut", "ana", "python", UsageReport(10, cancelled=True), "  ")  # cancelled before any text
    for i in range(4):  # remembers 3: the first is forgotten
        ev.answered(f"c{i}", "ana", "go", UsageReport(10, shifted_cached_tokens=5, total_ms=400), "f()")
    assert not ev.record("ana", "view", "never", None, None)
    assert not ev.record("ana", "view", "empty", None, None)
    assert not ev.record("ana", "view", "cut", None, None)
    assert not ev.record("ana", "view", "c0", None, None)
    assert ev.record("ana", "dismiss", "c3", None, None)
    assert ev.summary("ana")["by_language"]["go"]["dismissed"] == 1


def test_accepted_characters_are_at_most_the_answer_and_buckets():
    ev, _ = _events()
    ev.answered("c", "ana", "", UsageReport(10), "x.y(1);")
    ev.record("ana", "select", "c", None, 10_000)
    assert ev.summary("ana")["by_language"]["unknown"]["accepted_chars"] == 7
    assert reuse_of(UsageReport(10)) == "miss" and reuse_of(UsageReport(10, shifted_cached_tokens=1)) == "shifted"
    assert [latency_bucket(x) for x in (None, 50, 150, 500, 5000)] == [">=1s", "<100ms", "100-300ms", "300ms-1s", ">=1s"]


def test_what_the_next_requests_say_of_a_suggestion():
    o = _Open("c", "x = ", line_digest(""), "compute(1)")
    assert fate(o, "import a\nx = ", "") == "open"
    assert fate(o, "x = comp", "") == "open"  # typing along it
    assert fate(o, "x = compute(1)", "") == "accepted"  # Tab, or typed to its end
    assert fate(o, "x = compute(1)\ny = ", "") == "accepted"  # a client answering from its own cache asks later
    assert fate(o, "x = compX", "") == "dismissed"
    assert fate(o, "z = ", "") == "dismissed"  # moved away
    assert fate(o, "x = comp", ")") == "dismissed"


def test_events_are_inferred_for_clients_that_report_none_and_not_for_those_that_do():
    ev, reg = _events()
    usage = UsageReport(10, prefix_cached_tokens=9, total_ms=150)
    ev.answered("a1", "vim", "python", usage, "compute(1)", "doc", "x = ", "")
    ev.settle("vim", "doc", "x = comp", "")  # typing along: still open
    assert ev.summary("vim")["total"]["shown"] == 0
    ev.settle("vim", "doc", "x = compute(1)\n", "")
    ev.answered("a2", "vim", "python", usage, "print(x)", "doc", "x = compute(1)\n", "")
    ev.settle("vim", "doc", "x = compute(1)\nreturn", "")
    assert ev.summary("vim")["total"] == {"shown": 2, "accepted": 1, "accepted_chars": 10, "dismissed": 1, "acceptance_rate": 0.5}
    assert 'source="inferred"' in generate_latest(reg).decode()
    assert ev.recent("vim") == [
        {"completion_id": "a1", "verdict": "accepted", "source": "inferred"},
        {"completion_id": "a2", "verdict": "dismissed", "source": "inferred"},
    ]
    ev.answered("e1", "code", "python", usage, "compute(1)", "doc", "x = ", "")
    ev.record("code", "view", "e1", None, None)  # this client reports: nothing is inferred for it
    ev.settle("code", "doc", "x = compX", "")
    assert ev.summary("code")["total"] == {"shown": 1, "accepted": 0, "accepted_chars": 0, "dismissed": 0, "acceptance_rate": 0.0}


def test_type_through_answers_cannot_inflate_the_acceptance_rate():
    """Each type-through answer had a new id without a model call: 'select' for 200 of them moved a
    user's rate from 1/5 to 201/205. They name the suggestion they continue, which has one outcome."""
    ev = Events(CollectorRegistry(), remembered=1000)
    ev.answered("model-1", "ana", "python", UsageReport(100, total_ms=50), "compute(1)", "d.py", "x = ", ")")
    for i in range(200):
        ev.answered(f"tt-{i}", "ana", "python", UsageReport(0, total_ms=1, type_through=True), "pute(1)", "d.py", "x = com", ")")
        assert ev.record("ana", "select", f"tt-{i}", None, None)
    assert ev.record("ana", "dismiss", "model-1", None, None)  # accepted already: that stands
    t = ev.summary("ana")["total"]
    assert (t["shown"], t["accepted"], t["dismissed"]) == (1, 1, 0)


def test_a_dismissed_suggestion_shown_again_can_be_accepted():
    """Escape, Backspace, the key again: type-through shows the same suggestion under a new id, and
    Tab takes it. The person took it: counted accepted (and dismissed once, for the first showing)."""
    ev = Events(CollectorRegistry(), remembered=1000)
    ev.answered("model-1", "ana", "python", UsageReport(100, total_ms=50), "compute(1)", "d.py", "x = ", ")")
    ev.record("ana", "view", "model-1", None, None)
    ev.record("ana", "dismiss", "model-1", None, None)
    ev.answered("tt-1", "ana", "python", UsageReport(0, total_ms=1, type_through=True), "compute(1)", "d.py", "x = ", ")")
    ev.record("ana", "view", "tt-1", None, None)
    ev.record("ana", "select", "tt-1", None, None)
    ev.record("ana", "dismiss", "tt-1", None, None)
    t = ev.summary("ana")["total"]
    assert (t["shown"], t["accepted"], t["dismissed"]) == (1, 1, 1)


def test_open_suggestions_hold_a_bounded_number_of_characters(monkeypatch):
    """A 3.5M-character one-line suffix per request, new document each time: the acceptance memory
    kept the whole rest of the line (~11 MB a request). Now a digest of it, and a budget for all."""
    from fimgate.gateway import events

    monkeypatch.setattr(events, "OPEN_CHARS", 10_000)
    ev = Events(CollectorRegistry(), remembered=20_000)
    huge = "y" * 3_500_000
    for i in range(50):
        ev.answered(f"c{i}", "ana", "python", UsageReport(10), "z" * 1000, f"doc{i}", "a" * 3_500_000, huge)
    held = sum(len(o.before) + len(o.text) for opens in ev._open.values() for o in opens)
    assert held <= 10_000 and ev._open_chars == held
    assert all(len(o.line_digest) == 16 for opens in ev._open.values() for o in opens)
    ev.settle("ana", "doc49", "a" * 3_500_000 + "z" * 1000, huge)  # the newest is still there, and decided
    assert ev.summary("ana")["total"]["accepted"] == 1


def test_users_tallies_are_bounded(monkeypatch):
    from fimgate.gateway import events

    monkeypatch.setattr(events, "MAX_USERS", 5)
    ev = Events(CollectorRegistry())
    for i in range(20):
        ev.answered(f"c{i}", f"user{i}", "go", UsageReport(10), "f()")
        ev.record(f"user{i}", "select", f"c{i}", None, None)
    assert len(ev._users) == 5 and len(ev._recent) == 5 and "user19" in ev._users


def test_a_stream_the_next_key_cut_counts_what_its_editor_showed_and_said_meanwhile():
    """On a slow machine an editor shows a streamed suggestion's first part (and reports it) while
    the answer is still decoding; the next key then cancels it. Both events count, for its user."""
    ev, _ = _events()
    ev.streaming("s1", "ana")
    assert ev.record("ana", "view", "s1", None, None)  # before the answer ended
    assert not ev.record("bob", "view", "s1", None, None)  # someone else's
    assert ev.summary("ana")["total"]["shown"] == 0  # not yet counted
    ev.answered("s1", "ana", "python", UsageReport(10, cancelled=True), "return fib")  # what was sent
    assert ev.record("ana", "dismiss", "s1", None, None)
    total = ev.summary("ana")["total"]
    assert total["shown"] == 1 and total["dismissed"] == 1
    assert ev.summary("bob")["total"]["shown"] == 0
    ev.streaming("s2", "ana")
    ev.answered("s2", "ana", "python", UsageReport(10, cancelled=True), "")  # nothing reached the editor
    assert not ev.record("ana", "view", "s2", None, None)


def test_a_streamed_type_through_answer_counts_what_was_reported_while_it_streamed():
    """The same as above with the type-through answer streamed: the Tab that came before it ended
    counts for the suggestion it continues."""
    ev = Events(CollectorRegistry(), remembered=1000)
    ev.answered("model-1", "ana", "python", UsageReport(100, total_ms=50), "compute(1)", "d.py", "x = ", ")")
    ev.streaming("tt-1", "ana")
    assert ev.record("ana", "select", "tt-1", None, None)
    ev.answered("tt-1", "ana", "python", UsageReport(0, total_ms=1, type_through=True), "compute(1)", "d.py", "x = ", ")")
    t = ev.summary("ana")["total"]
    assert (t["shown"], t["accepted"], t["dismissed"]) == (1, 1, 0)
