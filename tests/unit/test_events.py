"""Acceptance events: counted once, only for the user the answer went to, never holding code."""

from prometheus_client import CollectorRegistry, generate_latest

from fimgate.backend.base import UsageReport
from fimgate.gateway.events import Events, latency_bucket, reuse_of


def _events():
    reg = CollectorRegistry()
    return Events(reg, remembered=3), reg


def test_events_count_once_per_answer_and_only_for_its_user():
    ev, reg = _events()
    ev.answered("c1", "ana", "python", UsageReport(100, prefix_cached_tokens=99, total_ms=80), chars=12)
    assert ev.record("ana", "view", "c1", None, None)
    assert ev.record("ana", "view", "c1", None, None)  # shown twice (re-triggered): once
    assert not ev.record("bo", "select", "c1", None, None)  # not bo's completion: refused, not counted
    assert ev.record("ana", "select", "c1", "word", 5)
    s = ev.summary("ana")
    assert s["total"] == {"shown": 1, "accepted": 1, "accepted_chars": 5, "dismissed": 0, "acceptance_rate": 1.0}
    assert s["by_language"]["python"]["accepted"] == 1
    assert ev.summary("bo")["total"]["shown"] == 0
    text = generate_latest(reg).decode()
    assert 'fimgate_suggestions_accepted_total{kind="word",language="python",latency="<100ms",reuse="prefix"} 1.0' in text


def test_unknown_forgotten_cancelled_and_empty_answers_take_no_events():
    ev, _ = _events()
    ev.answered("gone", "ana", "python", UsageReport(10, cancelled=True), chars=4)
    ev.answered("empty", "ana", "python", UsageReport(10), chars=0)
    for i in range(4):  # remembers 3: the first is forgotten
        ev.answered(f"c{i}", "ana", "go", UsageReport(10, shifted_cached_tokens=5, total_ms=400), chars=3)
    assert not ev.record("ana", "view", "gone", None, None)
    assert not ev.record("ana", "view", "empty", None, None)
    assert not ev.record("ana", "view", "c0", None, None)
    assert ev.record("ana", "dismiss", "c3", None, None)
    assert ev.summary("ana")["by_language"]["go"]["dismissed"] == 1


def test_accepted_characters_are_at_most_the_answer_and_buckets():
    ev, _ = _events()
    ev.answered("c", "ana", "", UsageReport(10), chars=7)
    ev.record("ana", "select", "c", None, 10_000)
    assert ev.summary("ana")["by_language"]["unknown"]["accepted_chars"] == 7
    assert reuse_of(UsageReport(10)) == "miss" and reuse_of(UsageReport(10, shifted_cached_tokens=1)) == "shifted"
    assert [latency_bucket(x) for x in (None, 50, 150, 500, 5000)] == [">=1s", "<100ms", "100-300ms", "300ms-1s", ">=1s"]
