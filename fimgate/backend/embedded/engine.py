"""The embedded engine: a real model on CPU or CUDA behind per-user prefix trees of KV blocks.

Memory has two tiers:
- the block pool: `budget_tokens` of K/V rows, owned by the per-user `BlockTree` (LRU, pins);
- a few slots (slot.py): contiguous K/V buffers a request computes in. A slot remembers whose
  tokens it holds, so a person's next keystroke usually finds its whole prompt already in place
  and copies nothing; otherwise the matched blocks are gathered from the pool into the slot. It
  also keeps the hidden state after each token whose logits it computed: a prompt that ends
  there (a key typed inside the word healing backed off, or inside the last suggestion) runs
  only the output head, and so does each token it decodes that the slot already holds.

A request runs: match (slot and tree, same user only) -> gather missing rows -> prefill the
rest -> decode token by token (cancel checked before each) -> write new full and partial
blocks back into the user's tree. When the plan allows shifted reuse, runs of the session's
previous prompt that reappear elsewhere are re-rotated into place and partly recomputed
(fimgate/backend/embedded/shifted_reuse.py) instead of prefilled. Requests run together, one
per slot: each is a coroutine that yields the compute it needs, and the scheduler
(fimgate/backend/embedded/scheduler.py) runs every running request's next token in one batched
step and prompts in chunks between those steps.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generator, Iterator

import torch

from fimgate.backend.base import (  # noqa: F401
    CancelToken,
    ContextOverflowError,
    FimPlan,
    Finished,
    PinReceipt,
    ReuseHint,
    StreamEvent,
    UsageReport,
)
from fimgate.backend.block_tree import BlockTree, common_prefix
from fimgate.backend.embedded.constraint import TextPrefixIndex
from fimgate.backend.embedded.decode_loop import Decoded, NextToken, decode, decode_rate, first_pick
from fimgate.backend.embedded.draft_policy import DraftPolicy
from fimgate.backend.embedded.drafts import PromptLookup
from fimgate.backend.embedded.heap import keep_large_buffers
from fimgate.backend.embedded.scheduler import BatchScheduler, PrefillWork, StepWork
from fimgate.backend.embedded.shifted_reuse import RECOMPUTE_CAP, select_recompute, uncovered, usable_spans
from fimgate.backend.embedded.slot import Slot
from fimgate.backend.embedded.threads import ThreadGovernor
from fimgate.backend.model.cpu_bf16 import resolve_prefill_dtype, resolve_step_dtype
from fimgate.backend.model.llama import KVBuffer, LlamaModel
from fimgate.backend.model.weights import LoadedModel, load_model
from fimgate.backend.pinning import KeystrokePins
from fimgate.backend.urgency import is_warmup, order_key
from fimgate.kernels.llama_step import StepStopped
from fimgate.kernels.rope import inv_frequencies, rerotate

MAX_REMEMBERED_OUTPUTS = 4096  # sessions whose last suggestion drafts may come from
# a key's prefill of up to this many tokens (an Enter and its indent, a word's last tokens) runs
# through the C step in one call, not the torch layers: 2-4 tokens 44-63 ms against 57-78 (8: 106
# vs 111, 16: 194 vs 187; Qwen2.5-Coder-0.5B on the AVX2 VM, 2026-12-06: `python -m
# fimgate.bench.micro.llama_step --dtype auto --context 140 --rows 2,3,4,8,16`); a call nothing can
# pause, so a few tokens only
AT_ONCE_TOKENS = 4
QUANTIZED = "gguf-blocks"  # prefill_dtype / step_dtype of a model multiplied in its file's quantized blocks


@dataclass(frozen=True)
class EngineConfig:
    block_size: int = 16
    budget_tokens: int = 16384  # the block pool, shared by all users
    budget_bytes: int | None = None  # when set, the pool's size in bytes (overrides budget_tokens)
    pin_cap_share: float = 0.5
    num_slots: int = 4  # requests that run at once (each slot: max_context rows of K/V)
    max_context: int = 4096
    device: str = "cpu"
    threads: int | None = None  # None: as many as the cores free now (fimgate/backend/embedded/threads.py)
    pin_policy: str = "pin"  # fimgate/backend/pinning.py: none, lru-only, pin, random+pin
    # "auto": a GGUF file's quantized blocks as they are, multiplied directly (CPU; quant_linear.py),
    # float32 for anything else; "float32": every weight dequantized to fp32 (the exact reference);
    # "bfloat16": weights and KV; "int8": int8 weights in 1-token steps (CPU)
    dtype: str = "float32"
    # "bfloat16": prompts multiply by bf16 copies of the linears (CPU fp32/int8); "auto": bfloat16 on a
    # CPU that multiplies bf16 natively (model/cpu_bf16.py), float32 (the exact reference) elsewhere
    prefill_dtype: str = "float32"
    # "bfloat16": one-token steps (decoding, a keystroke's append) multiply by bf16 copies of the
    # linears, fp32 activations and sums (CPU fp32); "auto": bfloat16 where the CPU has native bf16
    # products, as prefill_dtype; --dtype int8 steps take the int8 copies instead
    step_dtype: str = "float32"
    cuda_graphs: bool = True  # on CUDA, one-token steps replay captured graphs (fimgate/backend/embedded/cuda_graphs.py)
    screened_head: bool = True  # greedy steps screen the output head in int8 (fimgate/backend/model/screened_head.py; CPU fp32)
    speculate: int = 4  # greedy decoding tries up to this many draft tokens a step (drafts.py); 0: never
    recompute_cap: int = RECOMPUTE_CAP  # moved tokens recomputed on a re-anchor, at most (shifted_reuse.py); 0: no cap

    def __post_init__(self) -> None:  # validated where it is built: a bad flag fails before a model loads
        if self.dtype not in ("auto", "float32", "bfloat16", "int8"):
            raise ValueError(f"unsupported dtype {self.dtype!r}: auto, float32, bfloat16 or int8 (weights)")
        if self.prefill_dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"unsupported prefill dtype {self.prefill_dtype!r}: auto, float32 or bfloat16")
        if self.step_dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"unsupported step dtype {self.step_dtype!r}: auto, float32 or bfloat16")
        if self.speculate < 0:
            raise ValueError("--speculate must be >= 0")
        if self.recompute_cap < 0:
            raise ValueError("--recompute-cap must be >= 0 (0: no cap)")
        if self.threads is not None and self.threads < 1:
            raise ValueError("--threads must be >= 1")
        if self.block_size < 1 or self.budget_tokens < self.block_size or self.num_slots < 1:
            raise ValueError("the KV pool needs block_size >= 1, budget_tokens >= block_size and num_slots >= 1")


@dataclass(frozen=True)
class _Cost:
    """What a request's prompt costs, by reuse class (UsageReport's prompt fields)."""

    prompt_tokens: int
    prefix_cached: int
    shifted_reused: int
    recomputed: int
    positions: list[int]  # the positions run: uncached ones, and the recomputed shifted ones
    threads: int  # compute threads when it started

    @classmethod
    def of(cls, prompt_tokens: int, cached: int, shifted: set[int], recompute: set[int], threads: int) -> "_Cost":
        positions = [p for p in range(cached, prompt_tokens) if p not in shifted or p in recompute]
        return cls(prompt_tokens, cached, len(shifted) - len(recompute), len(recompute), positions, threads)

    def report(self, out: Decoded, t0: float, t_decoded: float, t_end: float, queued_ms: float) -> UsageReport:
        ttft = None if out.t_first is None else (out.t_first - t0) * 1000
        return UsageReport(
            prompt_tokens=self.prompt_tokens,
            prefix_cached_tokens=self.prefix_cached,
            shifted_cached_tokens=self.shifted_reused,
            recomputed_tokens=self.recomputed,
            prefilled_tokens=len(self.positions) - self.recomputed,
            completion_tokens=out.num_out,
            ttft_ms=ttft,
            decode_tokens_per_s=decode_rate(out.t_first, t_decoded, out.num_out),
            draft_tokens=out.drafted,
            accepted_draft_tokens=out.accepted,
            total_ms=(t_end - t0) * 1000,
            queued_ms=queued_ms,
            threads=self.threads,
            cancelled=out.finish == "cancelled",
            finish_reason=out.finish,
        )


class EmbeddedEngine:
    batches = True  # requests run together: call generate() from each request's thread

    def __init__(self, loaded: LoadedModel, config: EngineConfig = EngineConfig()) -> None:
        self.governor = ThreadGovernor(config.threads)  # threads fit to the cores free now (threads.py)
        self.heap_tuned = config.device == "cpu" and keep_large_buffers()  # no fresh pages per temporary (heap.py)
        self.config = config
        self.model_config = loaded.config
        self._name = loaded.name
        self._tokenizer = loaded.tokenizer
        dtype = torch.bfloat16 if config.dtype == "bfloat16" else torch.float32
        plain = "float32" if config.dtype == "auto" else config.dtype
        self.prefill_dtype = resolve_prefill_dtype(config.prefill_dtype, config.device, plain)
        fp32_model = dtype == torch.float32 and not loaded.quantized  # only fp32 weights get int8 or bf16 copies
        copies = resolve_step_dtype(config.step_dtype, config.device, plain) if fp32_model else "float32"
        self.step_dtype = copies if fp32_model else "bfloat16"  # what a one-token step multiplies by
        if loaded.quantized:  # the file's blocks, for prompts and steps alike
            self.prefill_dtype = self.step_dtype = QUANTIZED
        self.model = LlamaModel(
            loaded.config,
            loaded.tensors,
            device=config.device,
            dtype=dtype,
            step_dtype=copies,
            screened_head=config.screened_head,
            bf16_prompts=self.prefill_dtype == "bfloat16" and fp32_model,
        )
        cfg = loaded.config
        self.capacity = min(config.max_context, cfg.max_position)
        budget_tokens = config.budget_tokens
        if config.budget_bytes is not None:
            budget_tokens = config.budget_bytes * (2 if config.dtype == "bfloat16" else 1) // cfg.kv_bytes_per_token
        num_blocks = max(1, budget_tokens // config.block_size)
        self._now_s = time.monotonic()  # the clock pins expire by: wall time, or a replay's trace time
        self.pins = KeystrokePins(config.pin_policy)
        self.tree = self._new_tree(num_blocks)
        rows = num_blocks * config.block_size
        self._pool = KVBuffer.empty(cfg, rows, device=config.device, dtype=dtype)
        self._slots = [
            Slot(KVBuffer.empty(cfg, self.capacity, device=config.device, dtype=dtype)) for _ in range(config.num_slots)
        ]
        self._lock = threading.Lock()
        self.scheduler = BatchScheduler(self, self._lock)
        self.speculate = config.speculate
        self.draft_policy = DraftPolicy()  # how many of those a step tries: what has paid here
        special = {self._tokenizer.token_id(t) for t in getattr(self._tokenizer, "_special", {})} - {None}
        self._heal_index = TextPrefixIndex(self._tokenizer.token_bytes, exclude_ids=special)
        self._last_outputs: OrderedDict[tuple[str, str], tuple[int, ...]] = OrderedDict()  # where drafts look first
        dev = self.model.device
        self._layer_rope = [(cfg.rope_for(i), inv_frequencies(cfg.rope_for(i)).to(dev)) for i in range(cfg.num_layers)]
        self._graphs = None
        if config.cuda_graphs and dev.type == "cuda":
            from fimgate.backend.embedded.cuda_graphs import GraphedDecoder

            self._graphs = GraphedDecoder(self.model)
            for s in self._slots:  # up front: no keystroke pays a capture
                self._graphs.capture_all(s.kv)

    def _new_tree(self, num_blocks: int) -> BlockTree:
        return BlockTree(
            num_blocks, self.config.block_size, self.config.pin_cap_share, clock=lambda: self._now_s, eviction=self.pins.eviction
        )

    @classmethod
    def from_path(cls, path: str, config: EngineConfig = EngineConfig()) -> "EmbeddedEngine":
        return cls(load_model(path, quantized=config.dtype == "auto" and config.device == "cpu"), config)

    @property
    def tokenizer(self):
        return self._tokenizer

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def context_tokens(self) -> int:
        """The longest prompt + completion one request may have (llama-server's n_ctx)."""
        return self.capacity

    @property
    def pool_bytes(self) -> int:
        return self._pool.k.numel() * self._pool.k.element_size() * 2

    # -- pins ------------------------------------------------------------------------------
    def pin(self, user_id: str, prompt_ids: tuple[int, ...], ttl_s: float) -> PinReceipt | None:
        with self._lock:
            return self.tree.pin(user_id, tuple(prompt_ids), ttl_s)

    def unpin(self, receipt: PinReceipt) -> None:
        with self._lock:
            self.tree.unpin(receipt)

    def uncached_tokens(self, plan: FimPlan) -> int:
        """About how many of the plan's prompt tokens a request would compute now: those no idle
        slot of the user nor the user's tree holds as a prefix, less the text its hints would move
        into place (shifted reuse: only what the tree still holds of each hint's source, as
        _place_moved_text places it). Read without the scheduler's lock, so a moment old at worst."""
        prompt = tuple(plan.prompt_ids)
        held = self.tree.peek(plan.user_id, prompt)
        for s in list(self._slots):
            if not s.busy and s.user_id == plan.user_id:
                held = max(held, common_prefix(s.tokens, prompt))
        moved = sum(s.num_tokens for _, spans in self._moved_text(plan, prompt, held, self._peeked) for s in spans)
        return max(0, len(prompt) - held - moved)

    def prefill_seconds(self, tokens: int) -> float | None:
        """About how long prefilling `tokens` would take now, at the rate this engine's recent
        prefill chunks ran (prefill_rate.py); None before any has run."""
        return self.scheduler.prefill_rate.seconds(tokens)

    # -- generation ------------------------------------------------------------------------
    def generate(self, plan: FimPlan, cancel: CancelToken | None = None, priority: float | None = None) -> Iterator[StreamEvent]:
        """The request's events. It runs together with the others (scheduler.py); `priority`
        orders its prefill against theirs (lower first; default: now, a warm-up later)."""
        cancel = cancel or CancelToken()
        prompt = list(plan.prompt_ids)
        if not prompt:
            raise ValueError("empty prompt")
        heal = plan.healing.text.encode("utf-8")
        max_new = plan.sampling.max_tokens + (len(heal) if heal else 0)
        if len(prompt) >= self.capacity:
            raise ContextOverflowError(f"prompt of {len(prompt)} tokens does not fit the context of {self.capacity}")
        max_new = min(max_new, self.capacity - len(prompt))
        warmup = is_warmup(plan)
        if priority is None:
            priority = order_key(time.monotonic(), warmup)
        arrived = time.perf_counter()
        coro = self._request(plan, prompt, max_new, cancel, arrived)
        yield from self.scheduler.run(coro, cancel, priority, warmup, owner=plan.user_id, prompt=tuple(prompt))

    def drive_on(self, runner) -> None:
        """Run the scheduler's loop on `runner` (a MainThreadRunner): servers compute on their main thread."""
        self.scheduler.drive_on(runner)

    @property
    def num_layers(self) -> int:  # (what prefill_by_layer yields after: the scheduler times partial chunks by it)
        return self.model_config.num_layers

    def free_slots(self) -> int:
        return sum(not s.busy for s in self._slots)

    def _take_slot(self, user_id: str, prompt: list[int]) -> tuple[Slot, int]:
        free = [s for s in self._slots if not s.busy]
        best, best_n = None, -1
        for s in free:
            n = common_prefix(s.tokens, prompt) if s.user_id == user_id else -1
            if n > best_n:
                best, best_n = s, n
        if best_n <= 0:
            best = min(free, key=lambda s: s.last_used)
            best_n = 0
        if best.user_id != user_id:
            best.clear(user_id)
        best.busy = True
        return best, best_n

    def _request(self, plan: FimPlan, prompt: list[int], max_new: int, cancel: CancelToken, arrived: float):
        """One request, stage by stage, as a coroutine the scheduler runs: claim a slot with the
        cached prefix, place shifted text, run the tokens that must be computed, decode, store
        and report. Yields events and the compute it needs (StepWork, PrefillWork)."""
        t0 = time.perf_counter()
        threads = self.governor.choose()
        self._now_s = plan.issued_at_s if plan.issued_at_s is not None else time.monotonic()
        slot, cached = self._claim(plan, prompt)
        try:
            shifted, recompute = self._place_moved_text(plan, prompt, cached, slot)
            cost = _Cost.of(len(prompt), cached, shifted, recompute, threads)
            if cancel.cancelled:
                yield self._finish(plan, slot, cost, Decoded("", 0, None, "cancelled"), t0, arrived)
                return
            logits = yield from self._prefill(plan, prompt, cost.positions, slot, bool(recompute), cached)
            if logits is None:  # cancelled before its prompt was computed
                yield self._finish(plan, slot, cost, Decoded("", 0, None, "cancelled"), t0, arrived)
                return
            if plan.sampling.max_tokens == 0:
                yield self._finish(plan, slot, cost, Decoded("", 0, None, "length"), t0, arrived)
                return
            drafter = self._drafter(plan, prompt)
            tok, eos = self._tokenizer, self._tokenizer.eos_id
            events = decode(plan, logits, tok.token_bytes, self._heal_index, eos, max_new, cancel, drafter)
            n = len(prompt)  # the request's tokens in the slot (an earlier suggestion's may follow them)
            reply = None
            while True:
                try:
                    ev = events.send(reply)
                except StopIteration as done:
                    out = done.value
                    break
                reply = None
                if isinstance(ev, NextToken):
                    n -= ev.discard
                    reply = yield from self._logits_after(slot, n, ev)
                    if reply is not None:  # None: cancelled, the step did not run
                        n += len(reply) if isinstance(reply, list) else 1  # (a row a draft run)
                else:
                    yield ev
            if out.discard:  # draft rows not kept: not the sequence's
                slot.cut(n - out.discard)
            self._remember_output(plan, slot.tokens[len(prompt) : n - out.discard])
            self.draft_policy.record_request(out.accepted, out.refused)
            yield self._finish(plan, slot, cost, out, t0, arrived)
        finally:
            slot.busy = False

    def _logits_after(self, slot: Slot, n: int, ev: NextToken):
        """The logits after ev.token at position n (a coroutine step): where the slot already holds
        that token there (an earlier suggestion decoded it) and kept its state, the head of that
        state (slot.py); else a step, with ev's draft tokens as rows after it (then a list)."""
        h = slot.state_after(n, ev.token)
        if h is not None:
            logits = self.model.head(h, ev.argmax_only, ev.only_ids)
            return [logits] if ev.draft else logits
        slot.cut(n)
        work = StepWork(ev.token, n, slot.kv, ev.argmax_only, ev.only_ids, ev.draft or None)
        reply = yield work
        if reply is not None:
            slot.extend([ev.token, *(work.draft or ())], work.hidden)  # the scheduler may have run fewer drafts
        return reply

    def _claim(self, plan: FimPlan, prompt: list[int]) -> tuple[Slot, int]:
        """A slot holding the longest cached prefix of the prompt (from a slot or the user's tree);
        the number of prompt tokens it already has: all of them where the slot kept the hidden
        state after the last (slot.py), else never the last (its logits are needed)."""
        slot, slot_hit = self._take_slot(plan.user_id, prompt)
        slot.last_used = time.perf_counter()
        if slot_hit >= len(prompt) and slot.state_after(len(prompt) - 1, prompt[-1]) is not None:
            return slot, len(prompt)  # (an earlier suggestion's tokens after it stay)
        match = self.tree.match(plan.user_id, tuple(prompt))
        if match.num_tokens > slot_hit:
            self._gather(slot.kv, match.blocks, slot_hit, match.num_tokens)
        cached = min(max(slot_hit, match.num_tokens), len(prompt) - 1)
        slot.cut(min(slot_hit, cached))  # (rows past the slot's own prefix were gathered from the tree)
        slot.extend(prompt[len(slot.tokens) : cached], None)
        return slot, cached

    def _remember_output(self, plan: FimPlan, output: list[int]) -> None:
        """The session's last suggestion, as tokens: the next request's drafts look in it first."""
        key = (plan.user_id, plan.session_id)
        self._last_outputs[key] = tuple(output)
        self._last_outputs.move_to_end(key)
        while len(self._last_outputs) > MAX_REMEMBERED_OUTPUTS:
            self._last_outputs.popitem(last=False)

    def _drafter(self, plan: FimPlan, prompt: list[int]) -> PromptLookup | None:
        """Drafts for a greedy request, where draft rows cost less than steps: the C step runs
        rows of one sequence in one call (CUDA graphs and torch layers run them one by one)."""
        if self.speculate == 0 or self.model.fused_step is None or self._graphs is not None:
            return None
        k = self.draft_policy.length(self.speculate, self.governor.threads)
        if k == 0:
            return None
        previous = self._last_outputs.get((plan.user_id, plan.session_id), ())
        return PromptLookup(prompt, previous, k)

    def _place_moved_text(self, plan: FimPlan, prompt: list[int], cached: int, slot: Slot) -> tuple[set[int], set[int]]:
        """Suffix-KV correction: text of an earlier prompt of the same user (the session's own, or
        another file's: FimPlan.hint_prompts) that reappears at new positions is placed there,
        keys re-rotated, from the first source that still has it cached; returns (positions
        reused shifted, positions of them to recompute)."""
        placed = []
        for blocks, spans in self._moved_text(plan, tuple(prompt), cached, self._matched):
            self._place_shifted(slot.kv, blocks, spans)
            placed += spans
        if not placed:
            return set(), set()
        placed.sort(key=lambda s: s.new_start)
        shifted = {p for s in placed for p in range(s.new_start, s.new_start + s.num_tokens)}
        return shifted, select_recompute(placed, plan.recompute_share, self.config.recompute_cap or None)

    def _matched(self, plan: FimPlan, src: tuple[int, ...]) -> tuple[int, list]:
        match = self.tree.match(plan.user_id, src)
        return match.num_tokens, match.blocks

    def _peeked(self, plan: FimPlan, src: tuple[int, ...]) -> tuple[int, None]:
        return self.tree.peek(plan.user_id, src), None  # (an estimate: the LRU untouched, no blocks)

    @staticmethod
    def _moved_text(plan: FimPlan, prompt: tuple[int, ...], cached: int, held) -> Iterator[tuple[object, list]]:
        """Where suffix-KV correction places moved text: for each hint source in turn, the blocks
        `held(plan, src)` says the tree holds of it (-> (tokens, blocks)) and the spans of it to place
        there - past `cached`, within what is held, not placed from an earlier source. Nothing
        where the plan allows no correction or its anchor is cached (an EFIM append)."""
        hints = plan.reuse_hints
        if plan.recompute_share is None or not any(h.new_start + h.num_tokens > cached for h in hints):
            return
        placed: list = []
        for source, src in plan.hint_prompts:
            mine = tuple(h for h in hints if h.source == source)
            if mine:
                tokens, blocks = held(plan, src)
                spans = uncovered(usable_spans(mine, src, prompt, cached, tokens), placed)
                yield blocks, spans
                placed = sorted(placed + spans, key=lambda s: s.new_start)

    def _prefill(self, plan: FimPlan, prompt: list[int], positions: list[int], slot: Slot, recomputing: bool, cached: int):
        """Run the prompt's uncached (and recomputed) positions (a coroutine step); the last
        one's logits, or None when cancelled first (the slot then keeps what was computed)."""
        argmax_only, only_ids = first_pick(plan, self._heal_index)
        if not positions:  # the slot kept the state after the prompt: its logits without a forward
            return self.model.head(slot.hidden[len(prompt) - 1], argmax_only, only_ids)
        if len(positions) == 1 and not recomputing:  # a keystroke's 1-token append: one decode step
            work = StepWork(prompt[positions[0]], positions[0], slot.kv, argmax_only, only_ids)
        else:
            at_once = not is_warmup(plan) and len(positions) <= AT_ONCE_TOKENS  # a key's, not a warm-up's
            work = PrefillWork([prompt[p] for p in positions], positions, slot.kv, argmax_only, only_ids, at_once=at_once)
        logits = yield work
        if logits is None:  # positions run in order, so all before the first not run hold their K/V
            done = work.done if isinstance(work, PrefillWork) else 0
            slot.extend(prompt[len(slot.tokens) : positions[done] if done < len(positions) else len(prompt)], None)
            return None
        slot.extend(prompt[len(slot.tokens) :], None)  # (the slot held prompt[:cached])
        for h in work.hidden or ():  # (the state after the last position run)
            slot.keep(positions[-1], h)
        return logits

    # -- compute (the scheduler calls these) -----------------------------------------------
    def stoppable_steps(self):
        """A context whose run_steps() can be ended from another thread (it yields the flag to
        set, fused_step.py; None where steps cannot stop: the torch layers, CUDA graphs)."""
        fused = self.model.fused_step
        return fused.stoppable() if fused is not None and self._graphs is None else contextlib.nullcontext(None)

    def run_steps(self, works: list[StepWork]) -> list[torch.Tensor | list[torch.Tensor]] | None:
        """One token for each work, and its draft tokens as rows after it, in one batched step
        where the model has one: each work's logits, a list of them (one a row) where it drafted.
        None: the step was stopped (stoppable_steps()) and its rows are to be dropped."""
        if self._graphs is not None:
            return [self._graphs.step(w.token, w.position, w.kv) for w in works]
        rows = [(w, j) for w in works for j in range(1 + len(w.draft or ()))]
        hidden: list[torch.Tensor] = []
        t = time.perf_counter()
        try:
            logits = self.model.step_batch(
                [w.draft[j - 1] if j else w.token for w, j in rows],
                [w.position + j for w, j in rows],
                [w.kv for w, _ in rows],
                [w.argmax_only if j == 0 else True for w, j in rows],
                [w.only_ids if j == 0 else None for w, j in rows],
                hidden=hidden,
            )
        except StepStopped:
            return None
        if len(works) == 1:  # what a draft row costs against a step (draft_policy.py)
            self.draft_policy.record_step(self.governor.threads, len(rows), time.perf_counter() - t)
        out, at = [], 0
        for w in works:
            n = 1 + len(w.draft or ())
            out.append(logits[at : at + n] if w.draft is not None else logits[at])
            w.hidden = hidden[at : at + n]
            at += n
        return out

    def prefill_by_layer(self, work: PrefillWork, end: int) -> Generator[None, None, torch.Tensor | None]:
        """Run work's tokens [done, end), yielding after each layer (the scheduler may run others'
        work between two); returns the logits after the last once end is the last."""
        dev = self.model.device
        last = end == len(work.ids)
        if work.at_once and work.done == 0 and last:
            logits = self.model.forward_rows(work.ids, work.positions, work.kv, work.argmax_only, work.only_ids, work.hidden)
            if logits is not None:  # (None: the C step cannot run them; the layers do)
                return logits
        layers = self.model.forward_by_layer(
            torch.tensor(work.ids[work.done : end], device=dev),
            torch.tensor(work.positions[work.done : end], device=dev),
            work.kv,
            logits_for="last" if last else "none",
            argmax_only=work.argmax_only,
            only_ids=work.only_ids,
            hidden=work.hidden if last else None,
        )
        while True:
            # a prefill of seconds takes the cores that free up: the editor busy with the move that
            # asked for it, then idle while the person reads (threads.py)
            self.governor.refit()
            try:
                next(layers)
            except StopIteration as done:
                return done.value
            yield

    def _step(
        self, token: int, position: int, kv: KVBuffer, argmax_only: bool = False, only_ids: list[int] | None = None
    ) -> torch.Tensor:
        """Logits after one token at `position`: a replayed CUDA graph where there is one."""
        if self._graphs is not None:
            return self._graphs.step(token, position, kv)
        dev = self.model.device
        return self.model.forward(
            torch.tensor([token], device=dev),
            torch.tensor([position], device=dev),
            kv,
            argmax_only=argmax_only,
            only_ids=only_ids,
        )

    def _finish(self, plan: FimPlan, slot: Slot, cost: "_Cost", out: Decoded, t0: float, arrived: float) -> Finished:
        t_decoded = time.perf_counter()
        self._store(plan.user_id, slot)
        if self.model.device.type == "cuda":  # a request ends when its kernels have (a pre-warm samples nothing)
            torch.cuda.synchronize(self.model.device)
        if plan.pins_anchor:
            self.pins.repin(self.tree, plan.user_id, plan.session_id, tuple(plan.prompt_ids[: plan.pin_tokens]), self._now_s)
        return Finished(text=out.text, usage=cost.report(out, t0, t_decoded, time.perf_counter(), (t0 - arrived) * 1000))

    # -- pool <-> slot ---------------------------------------------------------------------
    def _rows(self, blocks, start: int, end: int) -> torch.Tensor:
        bs = self.config.block_size
        ids = torch.tensor([b for b, _ in blocks], dtype=torch.long)
        pos = torch.arange(start, end)
        return ids[pos // bs] * bs + pos % bs

    def _gather(self, kv: KVBuffer, blocks, start: int, end: int) -> None:
        rows = self._rows(blocks, start, end).to(self.model.device)
        kv.k[:, :, start:end] = self._pool.k.index_select(2, rows)
        kv.v[:, :, start:end] = self._pool.v.index_select(2, rows)

    def _place_shifted(self, kv: KVBuffer, old_blocks, spans: list[ReuseHint]) -> None:
        """Copy the old prompt's K/V of each span to its new position, keys re-rotated by delta."""
        for s in spans:
            rows = self._rows(old_blocks, s.old_start, s.old_start + s.num_tokens).to(self.model.device)
            new = slice(s.new_start, s.new_start + s.num_tokens)
            delta = torch.full((s.num_tokens,), s.delta, dtype=torch.long, device=self.model.device)
            k_old = self._pool.k.index_select(2, rows)  # (layers, kv_heads, n, head_dim)
            if self.model_config.local_rope is None:
                rope, inv = self._layer_rope[0]
                kv.k[:, :, new] = rerotate(k_old, delta, inv, rope)
            else:
                for i, (rope, inv) in enumerate(self._layer_rope):
                    kv.k[i, :, new] = rerotate(k_old[i], delta, inv, rope)
            kv.v[:, :, new] = self._pool.v.index_select(2, rows)

    def _store(self, user_id: str, slot: Slot) -> None:
        bs = self.config.block_size
        for w in self.tree.insert(user_id, tuple(slot.tokens)):
            # a block's rows are contiguous: a slice, not index_copy_, which touched every page of
            # the pool (~100 MB resident per call for Qwen2.5-0.5B's 16k-token pool)
            at = w.block_id * bs + w.offset
            self._pool.k[:, :, at : at + w.num_tokens] = slot.kv.k[:, :, w.start : w.start + w.num_tokens]
            self._pool.v[:, :, at : at + w.num_tokens] = slot.kv.v[:, :, w.start : w.start + w.num_tokens]

    def reset(self, pin_policy: str | None = None, speculate: int | None = None) -> None:
        """Forget every cached block, slot and pin (benchmarks start each strategy from cold)."""
        with self._lock:
            self.speculate = self.speculate if speculate is None else speculate
            self.pins = KeystrokePins(pin_policy or self.pins.policy)
            self.tree = self._new_tree(self.tree.num_blocks)
            for s in self._slots:
                s.clear()
                s.last_used = 0.0
            self._last_outputs.clear()
            self.draft_policy = DraftPolicy()

    def stats(self) -> dict:
        return {
            "pool_blocks": self.tree.num_blocks,
            "used_blocks": self.tree.num_used,
            "pinned_blocks": self.tree.num_pinned,
            "evicted_blocks": self.tree.num_evicted,
            "users": self.tree.num_users,
            "pool_bytes": self.pool_bytes,
            "prefill_dtype": self.prefill_dtype,
            "step_dtype": self.step_dtype,
            "heap_tuned": self.heap_tuned,
            **self.governor.state(),
            **self.draft_policy.state(self.governor.threads),
        }
