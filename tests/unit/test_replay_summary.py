"""The replay's summary: TTFT over all typing requests does not flatter a strategy that drops most."""
from bench.replay import Outcome, summarize, user_slices
from bench.trace import TraceRequest


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


def test_time_scale_stretches_every_gap_of_each_person():
    reqs = [TraceRequest(index=i, t_ms=1000.0 + 100 * i, file="a.py", text="x", cursor=0, typed_next="",
                         next_event_ms=1050.0 + 100 * i) for i in range(4)]
    ((one,),), ((two,),) = user_slices(reqs[:1], 1), user_slices(reqs[:1], 1, time_scale=3.0)
    assert two.t_ms == 3 * one.t_ms and two.next_event_ms == 3 * one.next_event_ms
    slow = user_slices(reqs, 2, time_scale=2.0)
    assert [r.t_ms for r in slow[0]] == [2.0, 202.0] and [r.t_ms for r in slow[1]] == [2.0, 202.0]
