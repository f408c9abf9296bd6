"""The replay's scheduler (FIFO against typing-first with chunked warm-ups) and the office
schedule, on a scripted engine whose prefill costs 1 ms a token."""

import math
from dataclasses import replace

from fimgate.backend.base import FimPlan, Finished, ReuseClass, UsageReport
from fimgate.backend.block_tree import common_prefix
from fimgate.backend.embedded.scheduler import PREFILL_CHUNK_TOKENS as WARMUP_CHUNK_TOKENS
from fimgate.bench.replay.simulate import replay_strategy, summarize
from fimgate.bench.workloads.office import office_slices, sessions
from fimgate.bench.workloads.trace import TraceRequest


class ScriptedEngine:
    def __init__(self):
        self.cached: dict[str, tuple] = {}

    def generate(self, plan: FimPlan, cancel=None):
        ids = plan.prompt_ids
        hit = min(common_prefix(self.cached.get(plan.user_id, ()), ids), len(ids) - 1)
        self.cached[plan.user_id] = ids
        n = len(ids) - hit
        typing = plan.sampling.max_tokens > 0
        yield Finished(
            "x" if typing else "",
            UsageReport(
                prompt_tokens=len(ids),
                prefix_cached_tokens=hit,
                prefilled_tokens=n,
                ttft_ms=n + 1.0 if typing else None,
                total_ms=n + (2.0 if typing else 0.0),
            ),
        )


class WholeText:
    """A strategy whose prompt is the document, one token a character."""

    def plan(self, user, state, sampling):
        return FimPlan(prompt_ids=tuple(ord(c) for c in state.text), user_id=user, session_id=state.path, sampling=sampling)


class Appends(WholeText):
    """The same prompts, said to be EFIM appends on an anchor (as the planner's would be)."""

    def plan(self, user, state, sampling):
        return replace(super().plan(user, state, sampling), reuse_class=ReuseClass.EFIM_APPEND)


def _req(t, file="a.py", text="abc", prewarm=False, index=0, nxt=None):
    return TraceRequest(
        index=index, t_ms=t, file=file, text=text, cursor=len(text), next_event_ms=nxt, typed_next="", prewarm=prewarm
    )


def test_typing_first_waits_one_chunk_not_a_whole_warmup():
    big = "y" * 1000
    slices = [[_req(0, "big.py", big, prewarm=True, index=-1)], [_req(10, "a.py", "abc")]]
    fifo = replay_strategy(ScriptedEngine(), WholeText(), slices)
    first = replay_strategy(ScriptedEngine(), WholeText(), slices, warmup_yield_ms=math.inf)
    ttft = lambda outs: next(o.ttft_ms for o in outs if not o.prewarm)  # noqa: E731
    assert ttft(fifo) > 990  # behind the whole 1,000-token warm-up
    assert ttft(first) <= WARMUP_CHUNK_TOKENS + 4
    warm = next(o for o in first if o.prewarm)
    assert warm.prompt_tokens == 1000 and warm.prefilled >= 1000  # the warm-up still finished, chunk by chunk
    assert summarize(first)["prewarm"]["requests"] == 1


def test_fifo_order_is_arrival_order():
    slices = [[_req(0, text="a" * 50, index=0), _req(5, text="a" * 51, index=1)], [_req(1, "b.py", "b" * 30)]]
    outs = replay_strategy(ScriptedEngine(), WholeText(), slices)
    assert [(o.user, o.index) for o in outs] == [(0, 0), (1, 0), (0, 1)]


def test_office_deals_sessions_and_reads_in_the_pauses():
    reqs = []
    t = 0
    for f in ("a.py", "b.py", "c.py", "d.py"):
        for n in range(5):
            reqs.append(_req(t, f, f * (n + 1), index=len(reqs)))
            t += 200
    assert [len(s) for s in sessions(reqs)] == [5, 5, 5, 5]
    people = office_slices(reqs, 2, time_scale=2.0, think_s=(10, 10), reads=1, seed=1)
    assert len(people) == 2
    for k, person in enumerate(people):
        typed = [r for r in person if not r.prewarm]
        assert {r.file for r in typed} == ({"a.py", "c.py"} if k == 0 else {"b.py", "d.py"})
        assert [r.t_ms for r in person] == sorted(r.t_ms for r in person)
        gaps = [b.t_ms - a.t_ms for a, b in zip(typed, typed[1:]) if a.file == b.file]
        assert gaps and all(g == 400 for g in gaps)  # the trace's 200 ms, stretched twice
        reads = [r for r in person if r.prewarm]
        assert len(reads) == 2 and all(r.cursor == 0 and r.text for r in reads)
        # a read falls between the person's sessions (or after the last), never inside one
        first_session_end = max(r.t_ms for r in typed if r.file == typed[0].file)
        assert reads[0].t_ms - first_session_end == 5000  # halfway through the 10 s pause


def test_a_warmup_yields_for_its_yield_time_then_takes_its_turn():
    big = "y" * 1000
    # person 0 opens a big file at t=0 (1 ms a token: ~1 s of chunks); person 1 types at 10 and 300 ms
    slices = [
        [_req(0, "big.py", big, prewarm=True, index=-1)],
        [_req(10, "a.py", "abc", index=0), _req(300, "a.py", "abcd", index=1)],
    ]
    ttft = lambda outs, i: next(o.ttft_ms for o in outs if o.index == i)  # noqa: E731
    outs = replay_strategy(ScriptedEngine(), WholeText(), slices, warmup_yield_ms=200)
    assert ttft(outs, 0) <= WARMUP_CHUNK_TOKENS + 4  # came within the yield: one chunk at most
    assert ttft(outs, 1) > 600  # came after it: the warm-up's turn, its remaining chunks go first
    warm = next(o for o in outs if o.prewarm)
    assert warm.prefilled >= 1000 and not warm.cancelled
    first = replay_strategy(ScriptedEngine(), WholeText(), slices, warmup_yield_ms=math.inf)
    assert ttft(first, 1) <= WARMUP_CHUNK_TOKENS + 4


def test_a_persons_key_drops_their_own_queued_warmup_chunks():
    big = "y" * 1000
    # person 0 opens big.py and types in it at once; person 1 keeps the engine busy meanwhile
    slices = [
        [_req(0, "big.py", big, prewarm=True, index=-1), _req(100, "big.py", big + "z", index=0)],
        [_req(1, "a.py", "a" * 200, index=0)],
    ]
    outs = replay_strategy(ScriptedEngine(), WholeText(), slices, warmup_yield_ms=math.inf)
    warm = next(o for o in outs if o.prewarm)
    assert warm.cancelled and warm.prefilled < 1000  # its chunks stopped when its owner typed
    key = next(o for o in outs if o.user == 0 and not o.prewarm)
    assert key.prompt_tokens == 1001 and key.prefix_cached + key.prefilled == 1001


def test_a_persons_first_key_takes_their_warmups_place_in_line():
    big = "y" * 1000
    # person 0 opens big.py at t=0 and types in it at 400 ms; person 1 types every 50 ms meanwhile
    slices = [
        [_req(0, "big.py", big, prewarm=True, index=-1), _req(400, "big.py", big + "z", index=0)],
        [_req(t, "a.py", "a" * (t // 50 + 1), index=t // 50) for t in range(50, 1000, 50)],
    ]
    outs = replay_strategy(ScriptedEngine(), WholeText(), slices, warmup_yield_ms=200)
    order = [(o.user, o.index) for o in outs if not o.dropped and not o.prewarm]
    mine = order.index((0, 0))
    # person 1's keys that came after the warm-up's place (200 ms) wait behind person 0's key,
    # though they arrived before it (at 250 ... 350 ms)
    behind = [(1, i) for i in range(5, 8) if (1, i) in order]
    assert behind and all(order.index(r) > mine for r in behind)
    warm = next(o for o in outs if o.prewarm)
    assert warm.cancelled  # the key does the rest of the warm-up's work


def test_a_key_that_cuts_its_own_warm_up_short_is_told_apart_from_an_eviction():
    big = "y" * 1000
    # person 0 jumps into big.py (a 1,000-token warm-up that yields to typing for 500 ms) and
    # types 100 ms later, before the warm-up has run; person 1 types elsewhere
    slices = [
        [
            _req(0, "big.py", big, prewarm=True, index=-1),
            _req(100, "big.py", big + "z", index=1),
            _req(2000, "big.py", big + "zz", index=2),
        ],
        [_req(1, "a.py", "a" * 20, index=0)],
    ]
    outs = replay_strategy(ScriptedEngine(), Appends(), slices, warmup_yield_ms=500)
    first, second = (next(o for o in outs if o.user == 0 and o.index == i) for i in (1, 2))
    assert first.after_unfinished_warmup and first.prefilled > 100  # it paid the warm-up's rest
    assert not second.after_unfinished_warmup
    causes = summarize(outs)["slowest_1pct"]["causes"]  # 1% of 3: the slowest one
    assert causes["warmup_unfinished"] == 1
