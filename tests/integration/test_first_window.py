"""The first window (gateway/first_window.py) on the real model: the first key at a place whose
prompt is not cached is answered from a short window while the full one prefills in the
background; once that is done, the next key is an EFIM append on the full anchor (a prefill of a
token or two). Off, every key runs the full window."""

import math
import time
from dataclasses import replace

from fimgate.backend.base import SamplingParams
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.templates import TEMPLATES
from fimgate.gateway.first_window import FirstWindow, short_window
from fimgate.gateway.service import CompletionService

TEXT = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(200))
CURSOR = TEXT.index("return x + 120") + len("return ")


def _service(engine, first_window: bool) -> CompletionService:
    planner = EfimPlanner(engine.tokenizer, TEMPLATES["smollm2"])
    # any fill, however long it would take on this machine (the time budget: tests/unit/test_first_window_budget.py)
    short = EfimPlanner(engine.tokenizer, TEMPLATES["smollm2"], short_window(128))
    fw = FirstWindow(engine, short, fill_s=math.inf) if first_window else None
    return CompletionService(engine, planner, type_through=False, first_window=fw)


def test_a_cold_place_is_answered_from_a_short_window_then_from_the_full_one(engine):
    svc = _service(engine, True)
    state = EditorState(user_id="fw", document_id="long.py", text=TEXT, cursor=CURSOR, path="long.py")
    sampling = SamplingParams(max_tokens=8)
    first = svc.complete(state, sampling)
    assert first.usage.prompt_tokens < 300  # 128 of prefix, 32 of suffix and the template's tokens
    assert svc.first_window.started == 1
    deadline = time.monotonic() + 120
    while svc.first_window._fills and time.monotonic() < deadline:  # the full anchor prefills behind it
        time.sleep(0.05)
    assert not svc.first_window._fills
    typed = replace(state, text=TEXT[:CURSOR] + "x" + TEXT[CURSOR:], cursor=CURSOR + 1)
    second = svc.complete(typed, sampling)
    assert second.usage.prompt_tokens > 800  # the full window (~900 tokens)
    assert second.usage.prefilled_tokens <= 4  # an EFIM append on the anchor the background prefilled
    assert svc.first_window.served == 1


def test_without_it_the_first_key_runs_the_full_window(engine):
    svc = _service(engine, False)
    state = EditorState(user_id="nofw", document_id="long.py", text=TEXT, cursor=CURSOR, path="long.py")
    assert svc.complete(state, SamplingParams(max_tokens=8)).usage.prompt_tokens > 800


def test_it_is_on_where_a_person_types_and_off_for_one_request():
    from fimgate.cli import build_parser
    from fimgate.flags import service_config
    from fimgate.gateway.first_window import TOKENS

    parse = build_parser().parse_args
    assert service_config(parse(["serve"])).first_window_tokens == TOKENS == 128
    assert service_config(parse(["lsp"])).first_window_tokens == TOKENS
    assert service_config(parse(["complete", "--file", "a.py"])).first_window_tokens == 0  # no next key to fill for
    assert service_config(parse(["serve", "--first-window-tokens", "0"])).first_window_tokens == 0


def test_the_cost_it_is_decided_on_counts_moved_text_only_where_it_is_cached(engine):
    """A jump's full prompt may repeat text of the session's last prompt (shifted reuse); that text
    saves work only where the last prompt was computed. A prefill cancelled early (a warm-up the
    next key superseded) held ~30 of ~730 moved tokens, and the estimate said 270 of 765 to compute:
    the key ran the full window for 2.9 s instead of a first window."""
    planner = EfimPlanner(engine.tokenizer, TEMPLATES["smollm2"], recompute_share=0.15)
    here = EditorState(user_id="est", document_id="long.py", text=TEXT, cursor=CURSOR, path="long.py")
    there = replace(here, cursor=TEXT.index("return x + 125") + len("return "))
    first = planner.plan(here, SamplingParams(max_tokens=0))
    jump = planner.plan(there, SamplingParams(max_tokens=8))
    assert jump.reuse_hints  # most of the text is the same, moved up by five functions
    assert engine.uncached_tokens(jump) > 0.9 * len(jump.prompt_ids)  # nothing of `first` was computed
    for _ in engine.generate(first):
        pass
    assert engine.uncached_tokens(jump) < 0.5 * len(jump.prompt_ids)  # now the moved text is there
