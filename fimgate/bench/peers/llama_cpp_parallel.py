"""llama.cpp decoding several sequences at once: what llama-server does with `--parallel N`.

One context with N sequences in a unified KV cache; each step is one `llama_decode` of a batch
holding every sequence's next token (llama.cpp's continuous batching), greedy. For
`fimgate bench engine --batch` (fimgate/bench/engine/batch_decode.py): aggregate decode speed beside
the embedded engine's batched steps, on the same prompts.
"""

from __future__ import annotations

import ctypes
import time

import numpy as np

from fimgate.bench.peers.llama_cpp import _load


class LlamaCppParallel:
    name = "llama.cpp"

    def __init__(self, model_path: str, threads: int, sequences: int, ctx_per_sequence: int = 1024) -> None:
        import llama_cpp.llama_cpp as lib

        self._lib = lib
        self._llm = _load(model_path, threads)  # the model, loaded as the single-sequence peer loads it
        self._n_vocab = self._llm.n_vocab()
        p = lib.llama_context_default_params()
        p.n_ctx = sequences * ctx_per_sequence
        p.n_batch = p.n_ubatch = 512
        p.n_seq_max = sequences
        p.kv_unified = True
        p.n_threads = p.n_threads_batch = threads
        self._ctx = lib.llama_init_from_model(self._llm._model.model, p)
        if not self._ctx:
            raise RuntimeError("llama.cpp could not make a context for parallel sequences")
        self.sequences = sequences
        self._batch = lib.llama_batch_init(512, 0, 1)

    def close(self) -> None:
        self._lib.llama_batch_free(self._batch)
        self._lib.llama_free(self._ctx)

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """entries: (token, position, sequence, wants logits)."""
        b = self._batch
        b.n_tokens = len(entries)
        for i, (tok, pos, seq, out) in enumerate(entries):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, pos, 1, out
            b.seq_id[i][0] = seq
        if self._lib.llama_decode(self._ctx, b) != 0:
            raise RuntimeError("llama_decode failed")

    def _argmax(self, i: int) -> int:
        ptr = self._lib.llama_get_logits_ith(self._ctx, i)
        return int(np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(self._n_vocab,)).argmax())

    def decode_streams(self, prompts: list[list[int]], tokens: int) -> dict:
        """Prefill each prompt as its own sequence (untimed), then `tokens` greedy steps of all
        of them together; the steps' time."""
        self._lib.llama_memory_clear(self._lib.llama_get_memory(self._ctx), True)
        nxt = []
        for s, ids in enumerate(prompts):
            for start in range(0, len(ids), 512):
                part = ids[start : start + 512]
                self._decode([(t, start + j, s, start + j == len(ids) - 1) for j, t in enumerate(part)])
            nxt.append(self._argmax(len(ids) - 1 - (len(ids) - 1) // 512 * 512))
        pos = [len(ids) for ids in prompts]
        t0 = time.perf_counter()
        for _ in range(tokens):
            self._decode([(nxt[s], pos[s], s, True) for s in range(len(prompts))])
            nxt = [self._argmax(s) for s in range(len(prompts))]
            pos = [p + 1 for p in pos]
        return {"seconds": time.perf_counter() - t0, "tokens": tokens * len(prompts)}
