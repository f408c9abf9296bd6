"""A one-token step through all the layers in one C call, for the models that fit it.

A keystroke's 1-token append and every decoding step are one token through 30 layers. In torch
that is ~15 calls a layer (norms, a rope, slicing, cache writes, adds, SiLU): ~450 dispatches,
~5 ms of a ~25 ms step on this 2-core VM beyond the products themselves. fimgate/kernels/llama_step.c
does the same work in one call, with the same int8 (or fp32) products and the same attention
kernel, so a step costs what its memory reads cost.

It fits plain Llama-style layers on CPU in fp32 activations: RMSNorm, fused qkv (with or without
biases) and gate_up, RoPE over the whole head, SiLU, no q/k norms, sandwich norms or sliding
windows (SmolLM2, Llama, Qwen2; not Gemma 3); weights in fp32, bf16, int8 or GGUF's quantized
blocks. Anything else - and a process without a C
compiler, or FIMGATE_CPU_KERNELS=torch - runs the torch layers in fimgate/backend/model/llama.py; both give
the same numbers up to fp32 rounding order (tests/unit/test_llama_step.py,
tests/integration/test_engine.py).
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Iterator

import torch

from fimgate.backend.model.quant_linear import QuantWeight
from fimgate.kernels.llama_step import Dims, LayerWeights, kernel_available, llama_step_batch, pack_layers
from fimgate.kernels.rope import cos_sin, rope_tables


def _weight(w):
    """A layer's linear as the kernel takes it: a QuantWeight's packed blocks, the copy a
    MixedWeight uses for steps (int8 or bf16), else fp32."""
    if isinstance(w, QuantWeight):
        return w.packed
    step = getattr(w, "step", None)
    if step is not None:
        return step
    return getattr(w, "fp32", w)


class FusedStep:
    def __init__(self, model) -> None:
        cfg = model.cfg
        self.rope = cfg.rope_for(0)
        self.inv_freq = model.inv_freq
        self.dims = Dims(
            hidden=cfg.hidden_size,
            heads=cfg.num_heads,
            kv_heads=cfg.num_kv_heads,
            head_dim=cfg.head_dim,
            intermediate=cfg.intermediate_size,
            rms_eps=cfg.rms_eps,
            attn_scale=cfg.attn_scale or cfg.head_dim**-0.5,
            gptj=self.rope.layout == "gptj",
        )
        self._weights = [
            LayerWeights(
                w["attn_norm"],
                w["mlp_norm"],
                _weight(w["qkv"]),
                _weight(w["o"]),
                _weight(w["gate_up"]),
                _weight(w["down"]),
                None if w["qkv_bias"] is None else w["qkv_bias"].float().contiguous(),
            )
            for w in model.layers
        ]
        self._model = model
        self._layers = pack_layers(self._weights)  # points into self._weights' tensors
        self._stop = ctypes.c_int32(0)  # set from another thread: the step running now ends (stoppable())
        self._armed = False

    @contextlib.contextmanager
    def stoppable(self) -> Iterator[ctypes.c_int32]:
        """Steps run inside may be ended between two layers: set the flag yielded to 1 (from any
        thread) and the step running raises kernels.llama_step.StepStopped. Outside, the flag is ignored."""
        self._stop.value = 0
        self._armed = True
        try:
            yield self._stop
        finally:
            self._armed = False
            self._stop.value = 0

    @classmethod
    def for_model(cls, model) -> "FusedStep | None":
        """A fused step for `model` (a fimgate.backend.model.llama.LlamaModel), or None where it does not
        fit or its kernel cannot be built. The kernel is built here, with the model, not at the
        first step: its compile (~4 s on 2 cores, once per machine) must not fall in the first keys."""
        cfg = model.cfg
        fits = (
            model.device.type == "cpu"
            and model.dtype == torch.float32
            and cfg.activation == "silu"
            and not (cfg.qk_norm or cfg.sandwich_norm or cfg.embed_scale or cfg.local_layers or cfg.sliding_window)
            and cfg.rope.dim == cfg.head_dim
            and all(cfg.rope_for(i) == cfg.rope for i in range(cfg.num_layers))
        )
        return cls(model) if fits and kernel_available() else None

    def __call__(self, token: int, slot: int, position: int, kv) -> torch.Tensor | None:
        """The last layer's output (1, hidden) after `token` at `position`, its K/V written at
        row `slot` of `kv`; None (nothing written) where the kernel is not available or the
        buffer is not fp32."""
        return self.batch([token], [slot], [position], [kv])

    def batch(self, tokens: list[int], slots: list[int], positions: list[int], kvs: list) -> torch.Tensor | None:
        """One token for each of several sequences in one call (each weight read once for all):
        (batch, hidden), row b what __call__ gives for sequence b alone; None where it cannot."""
        if any(kv.k.dtype != torch.float32 or not kv.k.is_contiguous() for kv in kvs):
            return None
        cos, sin = cos_sin(torch.tensor(positions), self.inv_freq)
        cos_t, sin_t = rope_tables(cos, sin, self.rope)
        xs = self._model.embed_tokens(torch.tensor(tokens)).contiguous()
        stop = self._stop if self._armed else None
        if not llama_step_batch(self._layers, xs, [(kv.k, kv.v) for kv in kvs], slots, cos_t, sin_t, self.dims, stop):
            return None
        return xs
