"""The Llama-family decoder (Llama, SmolLM2, Qwen2) as plain torch ops over an explicit KV buffer.

The engine owns the KV memory; the model only reads and writes the `KVBuffer` it is handed.
Every forward call names the buffer slots its tokens occupy and the positions they sit at, so
the same code runs a cold prefill, an append after a prefix hit, one decode step, and the
selective recompute of scattered tokens after a shift:

    slots      0 1 2 3 4 5 6 7        query at slot s attends to keys at slots <= s
    buffer    [k k k k k k . .]       (causal by slot, whatever was computed when)
    forward(ids, slots=[5, 6])  writes k/v at 5 and 6, returns logits for the last one
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from backend.model_config import ModelConfig
from kernels.rope import apply_rope, cos_sin, inv_frequencies


@dataclass
class KVBuffer:
    """Contiguous K and V for one sequence. k, v: (num_layers, num_kv_heads, capacity, head_dim)."""

    k: torch.Tensor
    v: torch.Tensor

    @classmethod
    def empty(cls, cfg: ModelConfig, capacity: int, device: torch.device | str = "cpu",
              dtype: torch.dtype = torch.float32) -> "KVBuffer":
        shape = (cfg.num_layers, cfg.num_kv_heads, capacity, cfg.head_dim)
        return cls(torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype))

    @property
    def capacity(self) -> int:
        return self.k.shape[2]


class LlamaModel:
    def __init__(self, cfg: ModelConfig, tensors: dict[str, torch.Tensor], device: str = "cpu",
                 dtype: torch.dtype = torch.float32) -> None:
        self.cfg = cfg
        self.device = torch.device(device)
        self.dtype = dtype
        t = {k: v.to(self.device, dtype) for k, v in tensors.items()}
        self.embed = t["embed"]
        self.lm_head = t["embed"] if cfg.tie_embeddings else t["lm_head"]
        self.final_norm = t["final_norm"]
        self.layers = [
            {name: t.get(f"layers.{i}.{name}") for name in
             ("attn_norm", "q", "k", "v", "o", "q_bias", "k_bias", "v_bias", "mlp_norm", "gate", "up", "down")}
            for i in range(cfg.num_layers)
        ]
        for i, layer in enumerate(self.layers):
            missing = [n for n in ("attn_norm", "q", "k", "v", "o", "mlp_norm", "gate", "up", "down") if layer[n] is None]
            if missing:
                raise ValueError(f"layer {i} lacks weights {missing}")
        self.inv_freq = inv_frequencies(cfg.rope).to(self.device)

    def _norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.rms_eps)).to(x.dtype) * w

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, slots: torch.Tensor, kv: KVBuffer, positions: torch.Tensor | None = None,
                logits_for: str = "last") -> torch.Tensor:
        """ids, slots, positions: (n,) long. Writes K/V at `slots`; positions default to slots.

        Returns logits (vocab,) for the last token, or (n, vocab) with logits_for="all"."""
        cfg = self.cfg
        n = ids.shape[0]
        positions = slots if positions is None else positions
        cos, sin = cos_sin(positions.to(self.device), self.inv_freq)
        lo, hi = int(slots[0]), int(slots[-1]) + 1
        contiguous = hi - lo == n and bool((slots[1:] > slots[:-1]).all()) if n > 1 else True
        kv_len = int(slots.max()) + 1
        if n == 1 or (contiguous and lo == 0):
            mask = None
        else:
            mask = torch.arange(kv_len, device=self.device)[None, :] <= slots.to(self.device)[:, None]
        x = self.embed[ids.to(self.device)]
        for i, w in enumerate(self.layers):
            h = self._norm(x, w["attn_norm"])
            q = F.linear(h, w["q"], w["q_bias"]).view(n, cfg.num_heads, cfg.head_dim).transpose(0, 1)
            k = F.linear(h, w["k"], w["k_bias"]).view(n, cfg.num_kv_heads, cfg.head_dim).transpose(0, 1)
            v = F.linear(h, w["v"], w["v_bias"]).view(n, cfg.num_kv_heads, cfg.head_dim).transpose(0, 1)
            q = apply_rope(q, cos, sin, cfg.rope)
            k = apply_rope(k, cos, sin, cfg.rope)
            if contiguous:
                kv.k[i, :, lo:hi] = k
                kv.v[i, :, lo:hi] = v
            else:
                kv.k[i].index_copy_(1, slots.to(self.device), k)
                kv.v[i].index_copy_(1, slots.to(self.device), v)
            keys, values = kv.k[i, :, :kv_len], kv.v[i, :, :kv_len]
            if n > 1 and mask is None:
                a = F.scaled_dot_product_attention(q, keys, values, is_causal=True, enable_gqa=True)
            else:
                a = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
            x = x + F.linear(a.transpose(0, 1).reshape(n, cfg.num_heads * cfg.head_dim), w["o"])
            h = self._norm(x, w["mlp_norm"])
            x = x + F.linear(F.silu(F.linear(h, w["gate"])) * F.linear(h, w["up"]), w["down"])
        if logits_for == "last":
            x = x[-1:]
        logits = F.linear(self._norm(x, self.final_norm), self.lm_head).float()
        return logits[0] if logits_for == "last" else logits
