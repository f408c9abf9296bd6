"""llama.cpp as a peer in the benchmarks (llama-cpp-python: `pip install fimgate[peers]`).

It takes the same token prompts the strategies build for the embedded engine and reuses its
cache the way llama-server does for a slot with `cache_prompt`: the longest common prefix of
the new prompt and what the context holds is kept, the rest is evaluated. Its logits go through
the embedded engine's own decoding loop (fimgate/backend/embedded/decode_loop.py: sampling, healing constraint,
stop tokens and strings), so completions compare. Both run the GGUF file's quantized blocks as
they are (the embedded engine at `--dtype auto`, its default).

With `cache_reuse` (llama-server's `--cache-reuse N`, 256 in the command llama.vscode's README
gives), cached runs of at least N tokens found later in the new prompt are kept too: their K/V
is moved to the new positions (llama-server's own loop: the prompt is walked from the end of the
common prefix; cached tokens that do not continue a run are skipped).

One context serves everyone: a request from another user than the last starts cold, so no
user reads another's cache (llama-server's slots would mix users' prompts).
"""

from __future__ import annotations

import os
import time
from typing import Iterator

import numpy as np
import torch

from fimgate.backend.base import CancelToken, FimPlan, Finished, StreamEvent, UsageReport
from fimgate.backend.embedded.constraint import TextPrefixIndex
from fimgate.backend.embedded.decode_loop import decode, decode_rate, stepped

N_CTX = 8192
CACHE_REUSE = 256  # llama.vscode's README starts llama-server with --cache-reuse 256


def _amx() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return " amx_tile" in f.read()
    except OSError:
        return False


def _load(model_path: str, threads: int):
    """A llama.cpp context on the GGUF as llama-server loads it, "extra" weight buffers included
    (weights repacked for the CPU's dot products), except on a CPU with AMX: there a natively
    built llama-cpp-python 0.3.36 repacks Q4_1 weights for AMX and then segfaults in its first
    decode, so the plain CPU buffers run (AVX-512)."""
    try:
        import llama_cpp.llama_cpp as lib
        from llama_cpp import Llama
    except ImportError:
        raise RuntimeError("the llama.cpp peer needs llama-cpp-python: pip install 'fimgate[peers]'") from None
    defaults = lib.llama_model_default_params

    def params():
        p = defaults()
        p.use_extra_bufts = not _amx()
        return p

    lib.llama_model_default_params = params  # Llama() has no argument for it
    try:
        return Llama(model_path=model_path, n_ctx=N_CTX, n_batch=512, n_threads=threads, n_threads_batch=threads, verbose=False)
    finally:
        lib.llama_model_default_params = defaults


class LlamaCppPeer:
    name = "llama.cpp"

    def __init__(
        self, model_path: str, tokenizer, model_name: str, threads: int | None = None, cache_reuse: int = CACHE_REUSE
    ) -> None:
        threads = threads or os.cpu_count() or 1
        self.cache_reuse = cache_reuse  # 0: the common prefix only
        self._llm = _load(model_path, threads)
        self._n_vocab = self._llm.n_vocab()
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.threads = threads
        special = {tokenizer.token_id(t) for t in getattr(tokenizer, "_special", {})} - {None}
        self._heal_index = TextPrefixIndex(tokenizer.token_bytes, exclude_ids=special)
        self._user: str | None = None
        self._cached: list[int] = []  # the tokens whose K/V the context holds, in order

    def reset(self, **_) -> None:
        self._user, self._cached = None, []
        self._llm.reset()

    def _eval(self, tokens: int | list[int], argmax_only: bool = False, only_ids: list[int] | None = None) -> torch.Tensor:
        """Append tokens to the context (after self._cached); the last one's logits (all of them,
        whatever the hints say: llama.cpp computes the whole head)."""
        tokens = [tokens] if isinstance(tokens, int) else tokens
        self._llm.n_tokens = len(self._cached)  # eval() drops the context's K/V from here on
        self._llm.eval(tokens)
        self._cached.extend(tokens)
        return torch.from_numpy(np.ctypeslib.as_array(self._llm._ctx.get_logits(), shape=(self._n_vocab,)).copy())

    def _reuse_chunks(self, prompt: list[int], keep: int) -> int:
        """llama-server's cache reuse after the common prefix `keep`: runs of >= cache_reuse
        cached tokens that continue the prompt are moved to their new positions. Returns how many
        of the prompt's tokens the context now holds (the prompt's first ones)."""
        import llama_cpp.llama_cpp as lib

        cached, end = self._cached, len(prompt) - 1  # the last prompt token is evaluated for its logits
        head_c = head_p = keep
        moves = []  # (cached position, prompt position, length)
        while head_c < len(cached) and head_p < end:
            n = 0
            while head_c + n < len(cached) and head_p + n < end and cached[head_c + n] == prompt[head_p + n]:
                n += 1
            if n >= self.cache_reuse:
                moves.append((head_c, head_p, n))
                head_c, head_p = head_c + n, head_p + n
            else:
                head_c += 1
        if not moves:
            return keep
        mem = lib.llama_get_memory(self._llm._ctx.ctx)
        pos = keep
        for c, _, n in moves:  # drop every cell no run keeps, then move the runs
            lib.llama_memory_seq_rm(mem, 0, pos, c)
            pos = c + n
        lib.llama_memory_seq_rm(mem, 0, pos, -1)
        for c, p, n in moves:
            lib.llama_memory_seq_add(mem, 0, c, c + n, p - c)
        self._cached[:] = prompt[:head_p]
        return head_p

    def generate(self, plan: FimPlan, cancel: CancelToken | None = None) -> Iterator[StreamEvent]:
        cancel = cancel or CancelToken()
        t0 = time.perf_counter()
        prompt = list(plan.prompt_ids)
        if not prompt:
            raise ValueError("empty prompt")
        if len(prompt) + plan.sampling.max_tokens > N_CTX:
            raise ValueError(f"prompt of {len(prompt)} tokens does not fit llama.cpp's context of {N_CTX}")
        if plan.user_id != self._user:
            self.reset()
            self._user = plan.user_id
        keep = 0
        for a, b in zip(self._cached, prompt[:-1]):  # the last prompt token is evaluated for its logits
            if a != b:
                break
            keep += 1
        reused = self._reuse_chunks(prompt, keep) if self.cache_reuse else keep
        del self._cached[reused:]
        logits = self._eval(prompt[reused:])
        usage = dict(
            prompt_tokens=len(prompt),
            prefix_cached_tokens=keep,
            shifted_cached_tokens=reused - keep,
            prefilled_tokens=len(prompt) - reused,
        )
        max_new = plan.sampling.max_tokens + len(plan.healing.text.encode("utf-8")) if plan.sampling.max_tokens else 0
        out = yield from stepped(
            decode(plan, logits, self.tokenizer.token_bytes, self._heal_index, self.tokenizer.eos_id, max_new, cancel), self._eval
        )
        t_end = time.perf_counter()
        yield Finished(
            out.text,
            UsageReport(
                **usage,
                completion_tokens=out.num_out,
                ttft_ms=None if out.t_first is None else (out.t_first - t0) * 1000,
                total_ms=(t_end - t0) * 1000,
                decode_tokens_per_s=decode_rate(out.t_first, t_end, out.num_out),
                cancelled=out.finish == "cancelled",
                finish_reason=out.finish,
            ),
        )
