"""Mixed-precision linears: int8 or bf16 weights for one-token steps (--dtype int8,
--step-dtype bfloat16), bf16 copies for prompts (--prefill-dtype bfloat16). Each is close to
fp32 where it applies and leaves the other case exactly fp32; the model refuses them where they have no fast path."""

import pytest
import torch

from fimgate.backend.model.llama import KVBuffer, LlamaModel
from fimgate.backend.model.mixed_linear import MAX_STEP_ROWS, MixedWeight, linear
from fimgate.bench.engine.random_model import byte_tokenizer, random_model, tiny_config


def _rel(got, want):
    return ((got - want).norm() / want.norm()).item()


def test_int8_steps_are_close_to_fp32_and_prompts_are_exact():
    torch.manual_seed(0)
    w = torch.randn(96, 64) / 8
    q = MixedWeight(w, step="int8")
    x = torch.randn(1, 64)
    want = torch.nn.functional.linear(x, w)
    got = linear(x, q)
    assert 0 < _rel(got, want) < 0.02  # int8 weights + bf16 rounding: close, not equal
    xs = torch.randn(MAX_STEP_ROWS + 1, 64)
    assert torch.equal(linear(xs, q), torch.nn.functional.linear(xs, w))
    bias = torch.randn(96)
    assert torch.allclose(linear(x, q, bias), got + bias)


def test_bf16_prompts_are_close_to_fp32_and_steps_are_exact():
    torch.manual_seed(1)
    w = torch.randn(96, 64) / 8
    b = MixedWeight(w, prompt_bf16=True)
    xs = torch.randn(MAX_STEP_ROWS + 1, 64)
    got = linear(xs, b)
    assert got.dtype == torch.float32
    assert 0 < _rel(got, torch.nn.functional.linear(xs, w)) < 0.02
    x = torch.randn(MAX_STEP_ROWS, 64)
    assert torch.equal(linear(x, b), torch.nn.functional.linear(x, w))
    both = MixedWeight(w, step="int8", prompt_bf16=True)
    assert torch.equal(linear(xs, both), got)
    assert torch.equal(linear(x[:1], both), linear(x[:1], MixedWeight(w, step="int8")))


def test_bf16_steps_share_the_prompt_copy_and_are_close_to_fp32():
    torch.manual_seed(2)
    w = torch.randn(96, 64) / 8
    both = MixedWeight(w, step="bfloat16", prompt_bf16=True)
    assert both.step is both.bf16  # one copy for both
    x = torch.randn(1, 64)
    got = linear(x, both)
    assert 0 < _rel(got, torch.nn.functional.linear(x, w)) < 0.01
    steps_only = MixedWeight(w, step="bfloat16")
    xs = torch.randn(MAX_STEP_ROWS + 1, 64)
    assert torch.equal(linear(xs, steps_only), torch.nn.functional.linear(xs, w))  # prompts stay fp32
    assert torch.equal(linear(x, steps_only), got)
    with pytest.raises(ValueError, match="int8 or bfloat16"):
        MixedWeight(w, step="float16")


def _prompt_then_step(model, cfg, ids):
    kv = KVBuffer.empty(cfg, 64)
    prompt = model.forward(ids[:-1], torch.arange(len(ids) - 1), kv, logits_for="all")
    return prompt, model.forward(ids[-1:], torch.tensor([len(ids) - 1]), kv)


def test_models_differ_from_fp32_only_where_asked():
    cfg = tiny_config()
    tensors = random_model(cfg, byte_tokenizer(), seed=2).tensors
    ids = torch.randint(0, 256, (40,))
    prompt32, step32 = _prompt_then_step(LlamaModel(cfg, tensors), cfg, ids)
    prompt8, step8 = _prompt_then_step(LlamaModel(cfg, tensors, step_dtype="int8"), cfg, ids)
    assert torch.equal(prompt8, prompt32)  # prefill: fp32 weights in both
    assert 0 < (step8 - step32).abs().max().item() < 0.05 * step32.abs().max().item()
    prompt16, step16 = _prompt_then_step(LlamaModel(cfg, tensors, bf16_prompts=True), cfg, ids)
    assert 0 < (prompt16 - prompt32).abs().max().item() < 0.05 * prompt32.abs().max().item()
    assert 0 < (step16 - step32).abs().max().item()  # the step reads K/V the bf16 prompt wrote
    prompt_b, step_b = _prompt_then_step(LlamaModel(cfg, tensors, step_dtype="bfloat16"), cfg, ids)
    assert torch.equal(prompt_b, prompt32)
    assert 0 < (step_b - step32).abs().max().item() < 0.01 * step32.abs().max().item()
    for kw in ({"step_dtype": "int8"}, {"step_dtype": "bfloat16"}, {"bf16_prompts": True}):
        with pytest.raises(ValueError, match="float32 models on CPU"):
            LlamaModel(cfg, tensors, dtype=torch.bfloat16, **kw)
