"""Rotary position embeddings: apply them, and re-rotate cached keys by a position delta.

RoPE rotates each pair of a head's dimensions by an angle proportional to the position:

    theta_i(p) = p * inv_freq[i]             i in [0, rotary_dim / 2)
    (x_a, x_b) -> (x_a cos - x_b sin,  x_b cos + x_a sin)

Rotations compose, R(p + d) = R(d) R(p), so a key computed at position p is moved to p + d
by rotating it once more by d. That is the whole trick behind shifted KV reuse: `rerotate`
is `apply_rope` with the deltas as positions. Only keys carry positions; values do not.

Two layouts pair dimensions differently:

    neox (HF Llama/Qwen2/Gemma):  a = x[..., :half],   b = x[..., half:rotary_dim]
    gptj (GGUF llama, interleave): a = x[..., 0:rotary_dim:2], b = x[..., 1:rotary_dim:2]

Dimensions past rotary_dim (partial rotary) pass through unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

LAYOUTS = ("neox", "gptj")


@dataclass(frozen=True)
class RopeConfig:
    head_dim: int
    base: float = 10000.0
    rotary_dim: int | None = None  # None: the whole head
    layout: str = "neox"
    # scaling: None, ("linear", factor) or ("llama3", factor, low_freq_factor, high_freq_factor, original_max_pos)
    scaling: tuple | None = None

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown RoPE layout {self.layout!r}; expected one of {LAYOUTS}")
        if self.dim % 2:
            raise ValueError("rotary_dim must be even")

    @property
    def dim(self) -> int:
        return self.rotary_dim or self.head_dim


def inv_frequencies(cfg: RopeConfig) -> torch.Tensor:
    """inv_freq: (rotary_dim / 2,) float32, with the model's own scaling applied."""
    inv = 1.0 / (cfg.base ** (torch.arange(0, cfg.dim, 2, dtype=torch.float64) / cfg.dim))
    if cfg.scaling is None:
        pass
    elif cfg.scaling[0] == "linear":
        inv = inv / cfg.scaling[1]
    elif cfg.scaling[0] == "llama3":
        _, factor, low, high, old_ctx = cfg.scaling
        wavelen = 2 * math.pi / inv
        low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
        smooth = (old_ctx / wavelen - low) / (high - low)
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        mid = (1 - smooth) * inv / factor + smooth * inv
        is_mid = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
        inv = torch.where(is_mid, mid, scaled)
    else:
        raise ValueError(f"unsupported RoPE scaling {cfg.scaling[0]!r}")
    return inv.to(torch.float32)


def cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """positions: (num_tokens,) int -> cos, sin: (num_tokens, rotary_dim / 2) float32.
    Angles are formed in float64 so large positions and deltas keep their precision."""
    angles = positions.to(torch.float64)[:, None] * inv_freq.to(torch.float64)[None, :]
    return angles.cos().to(torch.float32), angles.sin().to(torch.float32)


def _triton_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("triton") is not None


USE_TRITON = torch.cuda.is_available() and _triton_available()


def rope_tables(cos: torch.Tensor, sin: torch.Tensor, cfg: RopeConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin: (num_tokens, rotary_dim / 2) -> per-dimension multipliers (num_tokens, rotary_dim)
    with which apply_rope is two products and a sum: x * cos_t + pair_swapped(x) * sin_t, where
    pair_swapped exchanges each dimension with its partner (the halves in neox; neighbours in
    gptj). Built once per forward, they serve every layer's call (`tables=`)."""
    if cfg.layout == "neox":
        return torch.cat((cos, cos), dim=-1), torch.cat((-sin, sin), dim=-1)
    return cos.repeat_interleave(2, dim=-1), torch.stack((-sin, sin), dim=-1).flatten(-2)


def apply_rope(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    cfg: RopeConfig,
    tables: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """x: (..., num_tokens, head_dim); cos, sin: (num_tokens, rotary_dim / 2). Returns a new tensor.
    On CUDA with Triton installed, the Triton kernel (fimgate/kernels/rope_triton.py) does the work.
    tables: rope_tables(cos, sin, cfg), for fp32 x rotated over the whole head: 4 ops instead of
    ~10 (a decode step is ~50 small ops a layer), each output the reference's bit for bit -
    fl(fl(a cos) + fl(b (-sin))) is fl(fl(a cos) - fl(b sin))."""
    if tables is not None and x.dtype == torch.float32 and cfg.dim == x.shape[-1] and not (USE_TRITON and x.is_cuda):
        cos_t, sin_t = tables
        half = cfg.dim // 2
        if cfg.layout == "neox":
            swapped = torch.roll(x, half, dims=-1)
        else:
            swapped = x.unflatten(-1, (half, 2)).flip(-1).flatten(-2)
        return x * cos_t + swapped * sin_t
    if USE_TRITON and x.is_cuda:
        from fimgate.kernels.rope_triton import apply_rope_triton

        return apply_rope_triton(x, cos.to(x.device), sin.to(x.device), cfg.layout == "gptj")
    return apply_rope_reference(x, cos, sin, cfg)


def apply_rope_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cfg: RopeConfig) -> torch.Tensor:
    """The torch reference of apply_rope, on any device."""
    rd = cfg.dim
    xr = x[..., :rd].float()
    if cfg.layout == "neox":
        a, b = xr[..., : rd // 2], xr[..., rd // 2 :]
        out = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
    else:
        a, b = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
    out = out.to(x.dtype)
    if rd == x.shape[-1]:
        return out
    return torch.cat((out, x[..., rd:]), dim=-1)


def rerotate(k: torch.Tensor, delta: torch.Tensor, inv_freq: torch.Tensor, cfg: RopeConfig) -> torch.Tensor:
    """Move cached keys by per-token position deltas.

    k: (..., num_tokens, head_dim) keys already rotated at their old positions p.
    delta: (num_tokens,) int, new position minus old. Returns keys as if computed at p + delta.
    """
    cos, sin = cos_sin(delta, inv_freq)
    return apply_rope(k, cos, sin, cfg)
