"""The decoder (Llama, SmolLM2, Qwen2, Gemma 3) as plain torch ops over an explicit KV buffer.

The engine owns the KV memory; the model only reads and writes the `KVBuffer` it is handed.
Every forward call names the buffer slots its tokens occupy and the positions they sit at, so
the same code runs a cold prefill, an append after a prefix hit, one decode step, and the
selective recompute of scattered tokens after a shift:

    slots      0 1 2 3 4 5 6 7        query at slot s attends to keys at slots <= s
    buffer    [k k k k k k . .]       (causal by slot, whatever was computed when)
    forward(ids, slots=[5, 6])  writes k/v at 5 and 6, returns logits for the last one

A slot is also the token's position, so a sliding-window layer (Gemma 3) attends to keys at
slots in (s - window, s].

A one-token forward of a plain Llama-style model on CPU runs all layers in one C call instead
(fimgate/backend/model/fused_step.py); the torch layers below are the reference it is tested against and
what every other call runs.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from dataclasses import dataclass
from typing import Generator

import numpy as np
import torch
import torch.nn.functional as F

from fimgate.backend.model.config import ModelConfig
from fimgate.backend.model.fused_step import FusedStep
from fimgate.backend.model.mixed_linear import MixedWeight, linear
from fimgate.backend.model.quant_linear import EXACT_ROWS, REFINE_TOP, QuantWeight, screen_copy
from fimgate.backend.model.screened_head import ScreenedHead
from fimgate.kernels.decode_attention import decode_attention as cpu_decode_attention
from fimgate.kernels.quant_gemv import QuantMatrix, dequantize
from fimgate.kernels.quant_gemv import embedding as quant_embedding
from fimgate.kernels.quant_pack import BITS
from fimgate.kernels.rope import apply_rope, cos_sin, inv_frequencies, rope_tables

_LAYER_WEIGHTS = (
    "attn_norm",
    "q",
    "k",
    "v",
    "o",
    "q_bias",
    "k_bias",
    "v_bias",
    "mlp_norm",
    "gate",
    "up",
    "down",
    "q_norm",
    "k_norm",
    "post_attn_norm",
    "post_mlp_norm",
)
_REQUIRED = ("attn_norm", "q", "k", "v", "o", "mlp_norm", "gate", "up", "down")
_MIXED_LINEARS = ("qkv", "o", "gate_up", "down")
EXACT_HEAD_ROWS = 4096  # up to here, the allowed rows of the head beat screening it (~2 ms vs ~3.4 ms)


def _to_the_end(steps: Generator[None, None, torch.Tensor]) -> torch.Tensor:
    """Run a generator of steps through; what it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def _fuse(layer: dict) -> None:
    """One (q;k;v) and one (gate;up) weight per layer: a one-token step then makes 4 matmul
    calls a layer instead of 7, and the separate weights become row views of the fused ones
    (no extra memory). Quantized weights stay separate matrices read by one kernel call
    (QuantWeight); a layer mixing quantized and plain parts has the quantized ones dequantized."""
    quant = [n for n in ("q", "k", "v", "o", "gate", "up", "down") if isinstance(layer[n], QuantMatrix)]
    if quant and len(quant) < 7:
        for n in quant:
            layer[n] = dequantize(layer[n])
    elif quant:
        for fused, parts in (("qkv", ("q", "k", "v")), ("gate_up", ("gate", "up")), ("o", ("o",)), ("down", ("down",))):
            layer[fused] = QuantWeight([layer[p] for p in parts])
        _fuse_bias(layer)
        return
    for fused, parts in (("qkv", ("q", "k", "v")), ("gate_up", ("gate", "up"))):
        w = torch.cat([layer[p] for p in parts])
        rows = 0
        for p in parts:
            n = layer[p].shape[0]
            layer[p] = w[rows : rows + n]
            rows += n
        layer[fused] = w
    _fuse_bias(layer)


def _fuse_bias(layer: dict) -> None:
    biases = [layer[f"{p}_bias"] for p in ("q", "k", "v")]
    layer["qkv_bias"] = (
        None
        if all(b is None for b in biases)
        else torch.cat(
            [
                b if b is not None else torch.zeros(layer[p].shape[0], dtype=layer["attn_norm"].dtype)
                for b, p in zip(biases, ("q", "k", "v"))
            ]
        )
    )


@dataclass
class KVBuffer:
    """Contiguous K and V for one sequence. k, v: (num_layers, num_kv_heads, capacity, head_dim)."""

    k: torch.Tensor
    v: torch.Tensor

    @classmethod
    def empty(
        cls, cfg: ModelConfig, capacity: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
    ) -> "KVBuffer":
        shape = (cfg.num_layers, cfg.num_kv_heads, capacity, cfg.head_dim)
        return cls(_zeros(shape, device, dtype), _zeros(shape, device, dtype))

    @property
    def capacity(self) -> int:
        return self.k.shape[2]


def _zeros(shape: tuple[int, ...], device, dtype: torch.dtype) -> torch.Tensor:
    """Zeros that take memory only where they are written: on CPU in fp32, calloc's pages, which
    the kernel maps in as rows are first written - a KV pool sized for many people is resident
    only as far as people have filled it (torch.zeros writes every page). In 4 KiB pages, not the
    2 MiB ones numpy asks for on large arrays: a 16-row block written into each (layer, head) plane
    of Qwen2.5-0.5B's pool made ~100 MB resident that way."""
    if torch.device(device).type != "cpu" or dtype != torch.float32:
        return torch.zeros(shape, device=device, dtype=dtype)
    a = np.zeros(shape, dtype=np.float32)
    _no_huge_pages(a.ctypes.data, a.nbytes)
    return torch.from_numpy(a)


def _no_huge_pages(address: int, nbytes: int) -> None:
    """madvise(MADV_NOHUGEPAGE) over the whole pages of [address, address + nbytes), on Linux."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    except (OSError, AttributeError):
        return
    lo = -(-address // mmap.PAGESIZE) * mmap.PAGESIZE
    hi = (address + nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
    if hi > lo:
        libc.madvise(lo, hi - lo, 15)  # MADV_NOHUGEPAGE


def _decode_attention(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """One query token against the cache, grouped-query heads without expanding K/V.

    q: (heads, 1, d); keys, values: (kv_heads, L, d) views into the KV buffer; bias: (L,) float32,
    0 or -inf per key (the fixed-shape step of a CUDA graph). SDPA with enable_gqa copies K and V
    once per query head group on CPU (~9x the cache per layer per step at 2k context); a batched
    matmul over (kv_heads, group) reads them once. On CPU in fp32, without a bias, the C kernel
    (fimgate/kernels/decode_attention.c) does it instead, where it is built."""
    if bias is None:
        out = cpu_decode_attention(q, keys, values, scale)
        if out is not None:
            return out
    kv_heads, _, d = keys.shape
    group = q.shape[0] // kv_heads
    qg = q.reshape(kv_heads, group, d)
    scores = (torch.matmul(qg, keys.transpose(1, 2)) * scale).float()  # (kv_heads, group, L)
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-1).to(values.dtype)
    return torch.matmul(probs, values).reshape(kv_heads * group, 1, d)


def _prefill_attention(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None, scale: float | None
) -> torch.Tensor:
    """Several queries: causal from slot 0 (mask None) or under a boolean (n, L) mask.

    q: (heads, n, d); keys, values: (kv_heads, L, d). Called with a batch dimension: on CPU, 3-D
    inputs take SDPA's math path (scores materialised, then NaN checks: ~60% of a 1k-token
    prefill), 4-D ones its flash kernel, 7x faster for a 1k-token causal prefill."""
    a = F.scaled_dot_product_attention(
        q[None], keys[None], values[None], attn_mask=mask, is_causal=mask is None, enable_gqa=True, scale=scale
    )
    return a[0]


class LlamaModel:
    def __init__(
        self,
        cfg: ModelConfig,
        tensors: dict[str, torch.Tensor],
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
        step_dtype: str = "float32",
        bf16_prompts: bool = False,
        screened_head: bool = False,
    ) -> None:
        """step_dtype "int8" or "bfloat16": one-token steps multiply by int8 or bf16 copies of the
        layers' linears (fp32 activations and sums); bf16_prompts: prompts multiply by bf16 copies
        of them (fimgate/backend/model/mixed_linear.py, CPU fp32 models only); the output head and
        everything else stay in `dtype`. screened_head: a forward asked only for its argmax screens
        the head with an int8 copy and computes in fp32 just the rows that can win
        (fimgate/backend/model/screened_head.py; CPU fp32 models, ignored elsewhere)."""
        self.cfg = cfg
        self.device = torch.device(device)
        self.dtype = dtype
        self.quantized = any(isinstance(v, QuantMatrix) for v in tensors.values())
        if self.quantized and (self.device.type != "cpu" or dtype != torch.float32):
            raise ValueError("quantized weights run on CPU with fp32 activations")
        t = {k: v if isinstance(v, QuantMatrix) else v.to(self.device, dtype) for k, v in tensors.items()}
        self.embed = t["embed"]  # a tensor, or a QuantMatrix read row by row (embed_tokens)
        head = t["embed"] if cfg.tie_embeddings else t["lm_head"]
        # a quantized head computes its highest rows again in fp32 (quant_linear.py: the pick is fp32's),
        # those a 4-bit copy's pass picks where the file's head has more bits (Q8_0: half the reads)
        if isinstance(head, QuantMatrix):
            screen = screen_copy(head) if BITS[head.fmt] > 4 and head.cols % 32 == 0 else None
            self.lm_head = QuantWeight([head], refine_top=REFINE_TOP, screen=screen)
        else:
            self.lm_head = head
        self.final_norm = t["final_norm"]
        self.screened_head = (
            ScreenedHead(self.lm_head)
            if (screened_head and self.device.type == "cpu" and dtype == torch.float32 and not self.quantized)
            else None
        )
        self.layers = [{name: t.get(f"layers.{i}.{name}") for name in _LAYER_WEIGHTS} for i in range(cfg.num_layers)]
        required = (
            _REQUIRED
            + (("q_norm", "k_norm") if cfg.qk_norm else ())
            + (("post_attn_norm", "post_mlp_norm") if cfg.sandwich_norm else ())
        )
        for i, layer in enumerate(self.layers):
            missing = [n for n in required if layer[n] is None]
            if missing:
                raise ValueError(f"layer {i} lacks weights {missing}")
            _fuse(layer)
        step_copy = None if step_dtype == "float32" or self.quantized else step_dtype
        bf16_prompts = bf16_prompts and not self.quantized
        if step_copy or bf16_prompts:
            if self.device.type != "cpu" or dtype != torch.float32:
                raise ValueError("int8 or bf16 steps and bf16 prompts are for float32 models on CPU")
            for layer in self.layers:
                for name in _MIXED_LINEARS:
                    layer[name] = MixedWeight(layer[name], step=step_copy, prompt_bf16=bf16_prompts)
        self.inv_freq = inv_frequencies(cfg.rope).to(self.device)
        self.local_inv_freq = inv_frequencies(cfg.local_rope).to(self.device) if cfg.local_rope else self.inv_freq
        self._act = (lambda x: F.gelu(x, approximate="tanh")) if cfg.activation == "gelu_tanh" else F.silu
        self.fused_step = FusedStep.for_model(self)  # one C call a one-token step, where the model fits

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """(n,) token ids -> (n, hidden) embeddings, in the model's dtype (Gemma's scale not applied)."""
        if isinstance(self.embed, QuantMatrix):
            return quant_embedding(self.embed, ids)
        return self.embed[ids.to(self.device)]

    @property
    def weight_bytes(self) -> int:
        """Bytes of the weights a one-token step reads (layers' linears and the head; not the
        embedding table, of which a step reads one row)."""

        def size(w) -> int:
            if isinstance(w, (QuantWeight, MixedWeight)):
                return w.nbytes if isinstance(w, QuantWeight) else w.step_bytes
            return w.numel() * w.element_size()

        return sum(size(layer[n]) for layer in self.layers for n in _MIXED_LINEARS) + size(self.lm_head)

    def _norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:  # one fused op, equal to the lines below bit for bit in fp32
            return F.rms_norm(x, (x.shape[-1],), w, self.cfg.rms_eps)
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.rms_eps)).to(x.dtype) * w

    @torch.inference_mode()
    def forward(
        self,
        ids: torch.Tensor,
        slots: torch.Tensor,
        kv: KVBuffer,
        positions: torch.Tensor | None = None,
        logits_for: str = "last",
        static_kv_len: int | None = None,
        argmax_only: bool = False,
        only_ids: list[int] | None = None,
        hidden: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """ids, slots, positions: (n,) long. Writes K/V at `slots`; positions default to slots.

        Returns logits (vocab,) for the last token, (n, vocab) with logits_for="all", None with
        "none" (a prompt's chunk before its last: only its K/V are wanted).
        static_kv_len: one token attending over rows [0, static_kv_len) under a mask, with fixed
        shapes and no host synchronisation - what a CUDA graph can capture (fimgate/backend/embedded/cuda_graphs.py).
        argmax_only, only_ids: what the caller reads of the last token's logits (_partial_head).
        hidden: a list the last token's hidden state (after the final norm) is appended to, where
        logits are computed: head() of it gives them again (fimgate/backend/embedded/slot.py)."""
        n = ids.shape[0]
        x = None
        if n == 1 and static_kv_len is None and self.fused_step is not None:
            x = self.fused_step(int(ids[0]), int(slots[0]), int(slots[0] if positions is None else positions[0]), kv)
        if x is None:
            x = _to_the_end(self._layers(ids, slots, kv, positions, static_kv_len))
        return self._logits(x, logits_for, argmax_only, only_ids, hidden)

    @torch.inference_mode()
    def forward_by_layer(
        self,
        ids: torch.Tensor,
        slots: torch.Tensor,
        kv: KVBuffer,
        logits_for: str = "last",
        argmax_only: bool = False,
        only_ids: list[int] | None = None,
        hidden: list[torch.Tensor] | None = None,
    ) -> Generator[None, None, torch.Tensor | None]:
        """forward() of a prompt's tokens (positions = slots), a generator that yields after each
        layer and returns what forward() returns: its caller may pause between two layers to run
        other sequences' work (on their own buffers) and come back - the scheduler does, so a
        keystroke never waits for a whole prefill chunk."""
        x = yield from self._layers(ids, slots, kv, None, None)
        return self._logits(x, logits_for, argmax_only, only_ids, hidden)

    @torch.inference_mode()
    def forward_rows(
        self,
        ids: list[int],
        slots: list[int],
        kv: KVBuffer,
        argmax_only: bool = False,
        only_ids: list[int] | None = None,
        hidden: list[torch.Tensor] | None = None,
    ) -> torch.Tensor | None:
        """forward() of a few tokens (positions = slots, ascending) in one call of the C step,
        each row attending up to its own slot as a prompt's causal mask does; the logits after the
        last. None where the C step cannot run them (no C step, a cache it does not take)."""
        if self.fused_step is None or any(b <= a for a, b in zip(slots, slots[1:])):
            return None
        x = self.fused_step.batch(ids, slots, slots, [kv] * len(ids))
        return None if x is None else self._logits(x, "last", argmax_only, only_ids, hidden)

    def _logits(
        self, x: torch.Tensor, logits_for: str, argmax_only: bool, only_ids: list[int] | None, hidden: list | None = None
    ) -> torch.Tensor | None:
        if logits_for == "none":
            return None
        if logits_for == "last":
            x = x[-1:]
        h = self._norm(x, self.final_norm)
        if hidden is not None:
            hidden.append(h[-1].clone())
        if logits_for == "last" and (argmax_only or only_ids is not None):
            return self._partial_head(h[0], argmax_only, only_ids)
        logits = linear(h, self.lm_head).float()
        return logits[0] if logits_for == "last" else logits

    @torch.inference_mode()
    def step_batch(
        self,
        tokens: list[int],
        slots: list[int],
        kvs: list[KVBuffer],
        argmax_only: list[bool],
        only_ids: list[list[int] | None],
        hidden: list[torch.Tensor] | None = None,
    ) -> list[torch.Tensor]:
        """One token for each of several sequences (each its own buffer, slot = position): the
        logits after each, as forward() gives them for that token alone. Plain Llama-style
        models on CPU run the layers for all of them in one C call, each weight read once
        (fused_step.py); the others run one forward each. hidden: as forward()'s, a state a row."""
        x = None if self.fused_step is None or len(tokens) == 1 else self.fused_step.batch(tokens, slots, slots, kvs)
        if x is None:
            return [
                self.forward(torch.tensor([t]), torch.tensor([s]), kv, argmax_only=a, only_ids=o, hidden=hidden)
                for t, s, kv, a, o in zip(tokens, slots, kvs, argmax_only, only_ids)
            ]
        hs = [self._norm(x[b : b + 1], self.final_norm)[0] for b in range(len(tokens))]  # row by row, as forward()
        if hidden is not None:
            hidden += hs
        if isinstance(self.lm_head, QuantWeight):  # the quantized head read once for every row that reads it whole
            whole = [b for b in range(len(tokens)) if not self._few(only_ids[b])]
            rows = self.lm_head(torch.stack([hs[b] for b in whole]), refine=False).float() if whole else None
            at = {b: i for i, b in enumerate(whole)}  # each row refined by _masked
            return [
                self._masked(rows[at[b]], only_ids[b], hs[b]) if b in at else self._exact_head(hs[b], only_ids[b])
                for b in range(len(tokens))
            ]
        out: list[torch.Tensor | None] = [None] * len(tokens)
        screened = [b for b in range(len(tokens)) if argmax_only[b] and only_ids[b] is None]
        if self.screened_head is not None and len(screened) > 1:  # greedy heads: the int8 screen read once for all
            for b, logits in zip(screened, self.screened_head.batch(torch.stack([hs[b] for b in screened])) or []):
                out[b] = logits
        for b in range(len(tokens)):
            if out[b] is None:
                out[b] = self._head(hs[b], argmax_only[b], only_ids[b])
        return out

    @torch.inference_mode()
    def head(self, h: torch.Tensor, argmax_only: bool = False, only_ids: list[int] | None = None) -> torch.Tensor:
        """The logits of a hidden state a forward kept (its `hidden`), as that forward gives them."""
        return self._head(h, argmax_only, only_ids)

    def _head(self, h: torch.Tensor, argmax_only: bool, only_ids: list[int] | None) -> torch.Tensor:
        if argmax_only or only_ids is not None:
            return self._partial_head(h, argmax_only, only_ids)
        return linear(h[None], self.lm_head).float()[0]

    def _partial_head(self, h: torch.Tensor, argmax_only: bool, only_ids: list[int] | None) -> torch.Tensor:
        """Logits (vocab,) for a pick that reads only part of them: argmax_only, only the argmax
        (over only_ids when given); only_ids, only those entries (a healing constraint; the
        sampler masks the rest). Up to EXACT_HEAD_ROWS allowed rows (EXACT_ROWS of a quantized
        head: in fp32 from their dequantized weights) are computed exactly, the others left -inf;
        a greedy pick over more (a bare space allows ~32k of 49k tokens) or over all of them takes
        the screened head (fimgate/backend/model/screened_head.py: int8 screen, fp32 for the rows
        that can win); anything else, the whole head."""
        if self._few(only_ids):
            return self._exact_head(h, only_ids)
        if argmax_only and self.screened_head is not None:
            return self.screened_head(h) if only_ids is None else self.screened_head(h, only_ids)
        if isinstance(self.lm_head, QuantWeight):  # refined once, by _masked, among the allowed rows
            return self._masked(self.lm_head(h[None], refine=False).float()[0], only_ids, h)
        return self._masked(linear(h[None], self.lm_head).float()[0], only_ids, h)

    def _few(self, only_ids: list[int] | None) -> bool:
        """Whether only_ids are few enough to compute alone (_exact_head)."""
        quantized = isinstance(self.lm_head, QuantWeight)
        return only_ids is not None and len(only_ids) <= (EXACT_ROWS if quantized else EXACT_HEAD_ROWS)

    def _exact_head(self, h: torch.Tensor, only_ids: list[int]) -> torch.Tensor:
        """Logits with only_ids computed exactly (fp32), the others -inf."""
        logits = torch.full((self.lm_head.shape[0],), float("-inf"), device=self.device)
        rows = torch.tensor(only_ids, dtype=torch.long, device=self.device)
        if isinstance(self.lm_head, QuantWeight):
            logits[rows] = self.lm_head.exact_rows(rows, h)
        else:
            logits[rows] = (self.lm_head.index_select(0, rows) @ h).float()
        return logits

    def _masked(self, logits: torch.Tensor, only_ids: list[int] | None, h: torch.Tensor) -> torch.Tensor:
        """A whole head's logits with all but only_ids at -inf (a quantized head is read whole,
        in one pass, not yet refined: its best rows, among only_ids when given, are computed
        again in fp32 here)."""
        keep = None if only_ids is None else torch.tensor(only_ids, dtype=torch.long)
        if isinstance(self.lm_head, QuantWeight):
            self.lm_head.refine(logits, h.float(), keep)
        if keep is None:
            return logits
        masked = torch.full_like(logits, float("-inf"))
        masked[keep] = logits[keep]
        return masked

    def _layers(
        self, ids: torch.Tensor, slots: torch.Tensor, kv: KVBuffer, positions: torch.Tensor | None, static_kv_len: int | None
    ) -> Generator[None, None, torch.Tensor]:
        """The tokens through every layer in torch ops, yielding after each layer: returns
        (n, hidden), K/V written at `slots`."""
        cfg = self.cfg
        n = ids.shape[0]
        positions = (slots if positions is None else positions).to(self.device)
        slots_d = slots.to(self.device)
        cos, sin = cos_sin(positions, self.inv_freq)
        local_cs = cos_sin(positions, self.local_inv_freq) if cfg.local_rope else (cos, sin)
        tables = {}  # layer's RopeConfig -> rope_tables, built once per forward
        window = cfg.sliding_window
        mask = local_mask = bias = local_bias = None
        if static_kv_len is not None:
            lo = hi = 0
            contiguous, kv_len = False, static_kv_len
            keys = torch.arange(kv_len, device=self.device)
            bias = torch.zeros(kv_len, device=self.device).masked_fill(keys > slots_d, float("-inf"))
            local_bias = bias.masked_fill(keys <= slots_d - window, float("-inf")) if window else bias
        else:
            lo, hi = int(slots[0]), int(slots[-1]) + 1
            contiguous = hi - lo == n and bool((slots[1:] > slots[:-1]).all()) if n > 1 else True
            kv_len = int(slots.max()) + 1
            if n > 1 and not (contiguous and lo == 0):
                mask = torch.arange(kv_len, device=self.device)[None, :] <= slots_d[:, None]
            if window and cfg.local_layers and kv_len > window and n > 1:
                keys = torch.arange(kv_len, device=self.device)[None, :]
                local_mask = (keys <= slots_d[:, None]) & (keys > slots_d[:, None] - window)
        x = self.embed_tokens(ids)
        if cfg.embed_scale:
            x = x * torch.tensor(cfg.embed_scale, dtype=x.dtype)
        for i, w in enumerate(self.layers):
            local = cfg.is_local(i)
            h = self._norm(x, w["attn_norm"])
            heads = cfg.num_heads + cfg.num_kv_heads  # q and k heads, then v's
            qkv = linear(h, w["qkv"], w["qkv_bias"]).view(n, heads + cfg.num_kv_heads, cfg.head_dim).transpose(0, 1)
            qk, v = qkv[:heads], qkv[heads:]
            if cfg.qk_norm:
                qk = torch.cat((self._norm(qk[: cfg.num_heads], w["q_norm"]), self._norm(qk[cfg.num_heads :], w["k_norm"])))
            c, sn = local_cs if local else (cos, sin)
            rope = cfg.rope_for(i)
            if rope not in tables:
                tables[rope] = rope_tables(c, sn, rope)
            qk = apply_rope(qk, c, sn, rope, tables[rope])  # q and k heads in one call
            q, k = qk[: cfg.num_heads], qk[cfg.num_heads :]
            if contiguous:
                kv.k[i, :, lo:hi] = k
                kv.v[i, :, lo:hi] = v
            else:
                kv.k[i].index_copy_(1, slots.to(self.device), k)
                kv.v[i].index_copy_(1, slots.to(self.device), v)
            start, m = 0, mask
            if local and window and kv_len > window and bias is None:
                if n == 1:  # one query at the last slot: the window is a slice
                    start = kv_len - window
                else:
                    m = local_mask
            keys, values = kv.k[i, :, start:kv_len], kv.v[i, :, start:kv_len]
            if n == 1:
                a = _decode_attention(q, keys, values, cfg.attn_scale or cfg.head_dim**-0.5, local_bias if local else bias)
            else:
                a = _prefill_attention(q, keys, values, m, cfg.attn_scale)
            a = linear(a.transpose(0, 1).reshape(n, cfg.num_heads * cfg.head_dim), w["o"])
            if cfg.sandwich_norm:
                a = self._norm(a, w["post_attn_norm"])
            x = x + a
            h = self._norm(x, w["mlp_norm"])
            gate, up = linear(h, w["gate_up"]).split(cfg.intermediate_size, dim=-1)
            f = linear(self._act(gate) * up, w["down"])
            if cfg.sandwich_norm:
                f = self._norm(f, w["post_mlp_norm"])
            x = x + f
            yield
        return x
