"""The first window (fimgate/gateway/first_window.py) fills a place's full anchor behind the keys
only where the engine can prefill it within FILL_S at the rate it runs now; slower, the keys keep
the short window and a warm-up prefills the short window they will take, not an anchor they never
would. The backend here is a stand-in that says what a prompt would cost (the real engine's
first window: tests/integration/test_first_window.py)."""

from fimgate.backend.base import SamplingParams
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.templates import TEMPLATES
from fimgate.gateway.first_window import COLD_TOKENS, FILL_S, FirstWindow, short_window

TEXT = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(200))
CURSOR = TEXT.index("return x + 120") + len("return ")


class _Engine:
    """A prompt costs its length; prefilling runs at `rate` tokens a second (None: not measured yet)."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.generated = []

    def uncached_tokens(self, plan) -> int:
        return len(plan.prompt_ids)

    def prefill_seconds(self, tokens: int) -> float | None:
        return None if self.rate is None else tokens / self.rate

    def generate(self, plan, cancel=None, priority=None):
        self.generated.append(plan)
        return iter(())


def _plans(tok, rate):
    engine = _Engine(rate)
    full = EfimPlanner(tok, TEMPLATES["smollm2"])
    fw = FirstWindow(engine, EfimPlanner(tok, TEMPLATES["smollm2"], short_window(128)))
    state = EditorState(user_id="u", document_id="long.py", text=TEXT, cursor=CURSOR, path="long.py")
    return engine, full, fw, state


def test_an_anchor_the_engine_fills_in_time_is_filled_behind_the_key(smol_tok):
    engine, full, fw, state = _plans(smol_tok, rate=1000.0)
    plan = full.plan(state, SamplingParams(max_tokens=8))
    assert COLD_TOKENS < len(plan.prompt_ids) < FILL_S * 1000
    key = fw.plan(("u", "long.py"), state, SamplingParams(max_tokens=8), plan)
    assert len(key.prompt_ids) < 300 and fw.started == 1 and fw.too_long == 0
    assert (
        fw.warm(state, SamplingParams(max_tokens=0), full.plan(state, SamplingParams(max_tokens=0))).prompt_ids == plan.prompt_ids
    )


def test_an_anchor_too_long_to_fill_leaves_the_keys_and_the_warmups_on_the_short_window(smol_tok):
    engine, full, fw, state = _plans(smol_tok, rate=75.0)  # an AVX2 CPU's rate: ~12 s for this anchor
    plan = full.plan(state, SamplingParams(max_tokens=8))
    assert len(plan.prompt_ids) > FILL_S * 75
    key = fw.plan(("u", "long.py"), state, SamplingParams(max_tokens=8), plan)
    assert len(key.prompt_ids) < 300 and fw.started == 0 and fw.too_long == 1
    assert engine.generated == []  # nothing prefills behind the keys
    warm = fw.warm(state, SamplingParams(max_tokens=0), full.plan(state, SamplingParams(max_tokens=0)))
    assert len(warm.prompt_ids) < 300 and warm.sampling.max_tokens == 0 and fw.warmed_short == 1


def test_before_any_prefill_was_timed_the_anchor_is_filled(smol_tok):
    engine, full, fw, state = _plans(smol_tok, rate=None)
    fw.plan(("u", "long.py"), state, SamplingParams(max_tokens=8), full.plan(state, SamplingParams(max_tokens=8)))
    assert fw.started == 1
