"""How each benchmark strategy turns an editor request into a backend plan.

    no-cache    the prompt the planner would build cold, for a user seen once: full prefill
    raw         no-cache with the plain FIM prompt: P ends at the cursor, even mid-line (the planner's
                line_after_middle off): the raw model's reference in bench quality
    psm-prefix  llama.vscode-style window, PSM layout, exact prefix caching (vLLM/SGLang today)
    efim        the EFIM planner: anchor + increment, fragment healing
    shift-only  efim, and on re-anchor the engine reuses shifted KV with no recompute (llama.cpp cache_reuse)
    efim+correction  efim, and shifted KV is re-rotated and a budget of tokens recomputed
    served      efim+correction at serve's default budget, named for bench quality's row of what
                `fimgate serve` shows: the hole as an editor holds it, cold, through the CompletionService
    type-through  served, then the person types half of what was shown and asks again (bench quality)
    llama.vscode  what llama.vscode asks llama-server (fimgate/bench/peers/llama_vscode.py): its window,
                llama-server's prompt, 128 tokens, n_indent and t_max_predict_ms, multi-line;
                no request with more than 8 characters right of the cursor

All strategies share one engine; each gets its own user namespace, and the engine is reset
between strategies, so every one starts cold on the same budget. Typing requests run through
the CompletionService that `fimgate serve` runs (`served`): the same single- or
multi-line decision, stop rules, clean-up and early stop, whatever the strategy's prompt.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from fimgate.backend.base import FimPlan, SamplingParams
from fimgate.bench.peers import llama_vscode
from fimgate.bench.replay.baseline import psm_prompt
from fimgate.efim.planner import HINT_SESSIONS, EditorState, EfimPlanner
from fimgate.efim.templates import FimTemplate
from fimgate.efim.window import WindowConfig
from fimgate.gateway.build import CORRECTION_SHARE  # served's; "efim+correction:0.05" names another share
from fimgate.gateway.service import CompletionService, Shape

ALL = ("no-cache", "raw", "psm-prefix", "shift-only", "efim", "efim+correction", "served", "type-through", "llama.vscode")


def parse(name: str) -> tuple[str, float | None]:
    """'efim+correction:0.3' -> ('efim+correction', 0.3); the share is None for other strategies."""
    base, _, share = name.partition(":")
    if base not in ALL:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(ALL)} (efim+correction:SHARE for a budget)")
    if share and base != "efim+correction":
        raise ValueError(f"only efim+correction takes a budget, not {base!r}")
    if base == "efim+correction":
        value = float(share) if share else CORRECTION_SHARE
        if not 0 <= value <= 1:
            raise ValueError("a correction budget is a share of the shifted tokens, in [0, 1]")
        return base, value
    if base in ("served", "type-through"):
        return base, CORRECTION_SHARE
    return base, (0.0 if base == "shift-only" else None)


class Strategy:
    def __init__(
        self, name: str, tok, template: FimTemplate, window: WindowConfig = WindowConfig(), hint_sessions: int = HINT_SESSIONS
    ) -> None:
        self.kind, self.recompute_share = parse(name)
        self.name = name
        self.tok = tok
        self.template = template
        self.planner = EfimPlanner(
            tok,
            template,
            window,
            recompute_share=self.recompute_share,
            hint_sessions=hint_sessions,
            line_after_middle=self.kind != "raw",
        )
        self._fresh = itertools.count()
        self.service: CompletionService | None = None  # served (bench quality): the service, made at first use
        self.plain: CompletionService | None = None  # type-through (bench quality): the same without it
        self.tally = {"typed": 0, "type_through": 0, "same_as_decoding_afresh": 0}  # type-through's answers
        self.afresh: list[str] = []  # type-through: per hole, the filling decoding afresh gives

    def request(self, state: EditorState, sampling: SamplingParams) -> tuple[SamplingParams, Shape] | None:
        """What the strategy's client asks for the editor state `state` (None: it sends nothing);
        `sampling` is what fimgate's extension asks."""
        if self.kind != "llama.vscode":
            return sampling, Shape()
        body = llama_vscode.request_body(state.text, state.cursor, state.context)
        if body is None:
            return None
        return llama_vscode.sampling(body), Shape(multiline=True, min_indent=body.n_indent or None)

    def plan(self, user: str, state: EditorState, sampling: SamplingParams, body=None) -> FimPlan:
        """`body`: llama.vscode's request for `state`, where the caller made it (window_body)."""
        uid = f"{self.name}/{user}"
        if self.kind in ("no-cache", "raw"):
            n = next(self._fresh)
            p = self.planner.plan(replace(state, user_id=f"{uid}/{n}", document_id=f"{n}"), sampling)
            self.planner.forget(f"{uid}/{n}", f"{n}")
            return p
        if self.kind in ("psm-prefix", "llama.vscode"):
            return FimPlan(
                prompt_ids=self._window_prompt(state, body),
                user_id=uid,
                session_id=state.document_id,
                sampling=sampling,
                stop_token_ids=self.planner.stop_token_ids,
            )
        return self.planner.plan(replace(state, user_id=uid), sampling)

    def _window_prompt(self, state: EditorState, body=None) -> tuple[int, ...]:
        """The prompt psm-prefix and llama.vscode cut afresh on every request."""
        if self.kind == "psm-prefix":
            return psm_prompt(self.tok, self.template, state.text, state.cursor)
        return llama_vscode.server_prompt(self.tok, self.template, body or self.window_body(state))

    def window_body(self, state: EditorState):
        """llama.vscode's /infill body for `state`."""
        body = llama_vscode.request_body(state.text, state.cursor, state.context)
        if body is None:  # a warm-up, asked for where llama.vscode would not ask: the line's end
            nl = state.text.find("\n", state.cursor)
            body = llama_vscode.request_body(state.text, len(state.text) if nl < 0 else nl, state.context)
        return body


def served(strategy, backend) -> tuple[CompletionService, "Planning"]:
    """The service `fimgate serve` runs, on `backend`, planning with `strategy` (anything with
    plan(user, state, sampling)); and its planning, which keeps the last plan made and stamps
    plans with the replay's clock."""
    planning = Planning(strategy)
    return CompletionService(backend, planning), planning


class Planning:
    """A strategy as the service's planner: plan(state, sampling), stamped with `now_s`."""

    def __init__(self, strategy) -> None:
        self.strategy = strategy
        self.now_s: float | None = None
        self.last: FimPlan | None = None

    def request(self, state: EditorState, sampling: SamplingParams) -> tuple[SamplingParams, Shape] | None:
        """What the strategy's client asks (Strategy.request); a strategy without one asks `sampling`."""
        ask = getattr(self.strategy, "request", None)
        return ask(state, sampling) if ask else (sampling, Shape())

    def plan(self, state: EditorState, sampling: SamplingParams) -> FimPlan:
        self.last = replace(self.strategy.plan(state.user_id, state, sampling), issued_at_s=self.now_s)
        return self.last
