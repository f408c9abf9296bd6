"""The replay's summary: TTFT over all typing requests does not flatter a strategy that drops most."""

from fimgate.bench.replay.simulate import Outcome, complete_in_readable_windows, summarize, tail_causes, user_slices
from fimgate.bench.workloads.trace import TraceRequest


def _ran(ttft):
    return Outcome(0, ttft, ttft + 10, late=False, cancelled=False, dropped=False)


def _dropped():
    return Outcome(0, None, None, late=True, cancelled=True, dropped=True)


def test_a_strategy_that_drops_most_requests_shows_nothing_at_p50_over_all_requests():
    keeps_up = summarize([_ran(50.0 + i) for i in range(10)])
    drops = summarize([_ran(20.0)] * 3 + [_dropped()] * 7)
    assert drops["ttft_ms"]["p50"] == 20.0  # over what ran, it looks faster...
    assert drops["ttft_ms_all_requests"]["p50"] is None  # ...but most people saw nothing
    assert keeps_up["ttft_ms_all_requests"]["p50"] == 55.0 and keeps_up["ran_share"] == 1.0
    assert drops["ran_share"] == 0.3


def test_requests_with_no_time_to_read_are_left_out_of_the_readable_window_figure():
    """Ten requests: three with 20-40 ms before the next key, all superseded; over all requests the
    p90 is never, over those a person could read (>= 100 ms, and the last, which has no next key)
    every suggestion was complete."""
    fast = [Outcome(0, 5.0, 30.0 + i, late=False, cancelled=False, dropped=False, index=i) for i in range(7)]
    superseded = [Outcome(0, 5.0, None, late=False, cancelled=True, dropped=False, index=7 + i) for i in range(3)]
    outcomes = fast + superseded
    windows = {i: 150.0 for i in range(6)} | {7: 20.0, 8: 30.0, 9: 40.0}  # 6 is the last request: no window
    assert summarize(outcomes)["complete_ms_all_requests"]["p90"] is None
    readable = complete_in_readable_windows(outcomes, windows)
    assert readable["requests"] == 7 and readable["complete_share"] == 1.0
    assert readable["complete_ms"] == {"p50": 33.0, "p90": 36.0, "p99": 36.0}
    slow = complete_in_readable_windows([Outcome(0, 5.0, None, False, True, False, index=0)], {0: 500.0})
    assert slow["complete_share"] == 0.0 and slow["complete_ms"]["p50"] is None  # superseded with time to spare: never


def test_time_scale_stretches_every_gap_of_each_person():
    reqs = [
        TraceRequest(
            index=i, t_ms=1000.0 + 100 * i, file="a.py", text="x", cursor=0, typed_next="", next_event_ms=1050.0 + 100 * i
        )
        for i in range(4)
    ]
    ((one,),), ((two,),) = user_slices(reqs[:1], 1), user_slices(reqs[:1], 1, time_scale=3.0)
    assert two.t_ms == 3 * one.t_ms and two.next_event_ms == 3 * one.next_event_ms
    slow = user_slices(reqs, 2, time_scale=2.0)
    assert [r.t_ms for r in slow[0]] == [2.0, 202.0] and [r.t_ms for r in slow[1]] == [2.0, 202.0]


def test_the_slowest_requests_are_told_apart_by_what_made_them_slow():
    fast = [
        Outcome(0, 15.0, 20.0, False, False, False, 1000, 999, prefilled=1, reuse_class="efim_append", queued_ms=0.0)
        for _ in range(97)
    ]
    reanchor = Outcome(1, 400.0, 410.0, False, False, False, 1000, 14, prefilled=300, reuse_class="reanchor", queued_ms=0.0)
    evicted = Outcome(2, 500.0, 510.0, False, False, False, 1000, 400, prefilled=600, reuse_class="efim_append", queued_ms=5.0)
    waited = Outcome(3, 450.0, 460.0, False, False, False, 1000, 999, prefilled=1, reuse_class="efim_append", queued_ms=430.0)
    ran = fast + [reanchor, evicted, waited]
    top = summarize(ran)["slowest_1pct"]  # 1% of 100: the slowest one
    assert top["requests"] == 1 and top["causes"]["anchor_evicted"] == 1 and top["ttft_ms_from"] == 500.0
    three = tail_causes(ran, 0.03)
    assert three["causes"] == {"reanchor": 1, "cold": 0, "warmup_unfinished": 0, "anchor_evicted": 1, "waited": 1}
    assert three["ttft_ms_from"] == 400.0 and three["prefilled_mean"] == round((300 + 600 + 1) / 3, 2)


def test_anchor_stats_count_whole_anchors_and_first_keys_after_a_pause():
    from fimgate.bench.replay.simulate import anchor_stats

    def key(user, t, prefilled, ttft=10.0, reuse="efim_append"):
        return Outcome(user, ttft, ttft, False, False, False, prefilled=prefilled, reuse_class=reuse, t_ms=t)

    outcomes = [
        key(0, 0, 1),
        key(0, 200, 1),
        key(0, 9000, 400, ttft=900.0),  # back after 8.8 s: its anchor was evicted
        key(1, 100, 1),
        key(1, 300, 2),
        Outcome(1, None, None, True, True, True, t_ms=6000),  # back after 5.7 s, dropped
    ]
    stats = anchor_stats(outcomes)
    assert stats["appends"] == 5 and stats["anchor_whole_share"] == 0.8
    assert stats["first_key_after_pause"]["requests"] == 2
    assert stats["first_key_after_pause"]["ttft_ms"]["p50"] is None  # one of the two never answered: sorts last
