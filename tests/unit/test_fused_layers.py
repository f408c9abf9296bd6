"""The model multiplies by fused (q;k;v) and (gate;up) weights and rotates q and k heads in one
call; the result must be the textbook layer computed weight by weight (biases, q/k norms)."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from fimgate.backend.model.llama import KVBuffer, LlamaModel
from fimgate.bench.engine.random_model import byte_tokenizer, random_model, tiny_config
from fimgate.kernels.rope import apply_rope, cos_sin


def _reference_logits(model: LlamaModel, tensors: dict, ids: torch.Tensor) -> torch.Tensor:
    cfg = model.cfg
    n = len(ids)
    cos, sin = cos_sin(torch.arange(n), model.inv_freq)
    x = tensors["embed"][ids]
    norm = lambda v, w: v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + cfg.rms_eps) * w  # noqa: E731
    for i in range(cfg.num_layers):
        t = {k.split(".", 2)[2]: v for k, v in tensors.items() if k.startswith(f"layers.{i}.")}
        h = norm(x, t["attn_norm"])
        split = lambda name, heads: F.linear(h, t[name], t.get(name + "_bias")).view(n, heads, cfg.head_dim)  # noqa: E731
        q, k, v = (
            split("q", cfg.num_heads).transpose(0, 1),
            split("k", cfg.num_kv_heads).transpose(0, 1),
            split("v", cfg.num_kv_heads).transpose(0, 1),
        )
        if cfg.qk_norm:
            q, k = norm(q, t["q_norm"]), norm(k, t["k_norm"])
        q, k = apply_rope(q, cos, sin, cfg.rope), apply_rope(k, cos, sin, cfg.rope)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + F.linear(a.transpose(0, 1).reshape(n, -1), t["o"])
        h = norm(x, t["mlp_norm"])
        x = x + F.linear(F.silu(F.linear(h, t["gate"])) * F.linear(h, t["up"]), t["down"])
    return F.linear(norm(x, tensors["final_norm"]), tensors["embed"])


@pytest.mark.parametrize("bias,qk_norm", [(False, False), (True, False), (True, True)])
def test_fused_layers_equal_the_layer_weight_by_weight(bias, qk_norm):
    cfg = dataclasses.replace(tiny_config(), qkv_bias=bias, qk_norm=qk_norm)
    loaded = random_model(cfg, byte_tokenizer(), seed=3)
    g = torch.Generator().manual_seed(1)
    for name, w in loaded.tensors.items():  # non-trivial biases and norms
        if name.endswith(("_bias", "_norm")):
            w.copy_(torch.randn(w.shape, generator=g) * 0.3 + (0 if name.endswith("_bias") else 1))
    model = LlamaModel(cfg, loaded.tensors)
    ids = torch.tensor([5, 77, 120, 3, 9, 200, 41])
    got = model.forward(ids, torch.arange(len(ids)), KVBuffer.empty(cfg, 32), logits_for="all")
    want = _reference_logits(model, loaded.tensors, ids)
    assert (got - want).abs().max().item() < 1e-4
    layer = model.layers[0]
    assert layer["k"].untyped_storage().data_ptr() == layer["qkv"].untyped_storage().data_ptr()  # a view, no copy
    assert model.layers[0]["qkv"].shape[0] == (cfg.num_heads + 2 * cfg.num_kv_heads) * cfg.head_dim
