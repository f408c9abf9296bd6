"""Int8 weights (--dtype int8): one-token steps use the int8 copy, close to fp32; prompts use
the fp32 weights unchanged; the model refuses int8 where it has no fast path."""
import pytest
import torch

from backend.int8_linear import MAX_INT8_ROWS, Int8Weight, linear
from backend.llama import LlamaModel
from bench.random_model import byte_tokenizer, random_model, tiny_config


def test_one_token_is_close_to_fp32_and_prompts_are_exact():
    torch.manual_seed(0)
    w = torch.randn(96, 64) / 8
    q = Int8Weight(w)
    x = torch.randn(1, 64)
    want = torch.nn.functional.linear(x, w)
    got = linear(x, q)
    rel = ((got - want).norm() / want.norm()).item()
    assert 0 < rel < 0.02  # int8 weights + bf16 rounding: close, not equal
    xs = torch.randn(MAX_INT8_ROWS + 1, 64)
    assert torch.equal(linear(xs, q), torch.nn.functional.linear(xs, w))
    bias = torch.randn(96)
    assert torch.allclose(linear(x, q, bias), got + bias)


def test_int8_model_steps_near_fp32_and_only_on_cpu_fp32():
    cfg = tiny_config()
    tensors = random_model(cfg, byte_tokenizer(), seed=2).tensors
    fp32, int8 = LlamaModel(cfg, tensors), LlamaModel(cfg, tensors, int8_weights=True)
    from backend.llama import KVBuffer

    ids = torch.randint(0, 256, (40,))
    out = []
    for m in (fp32, int8):
        kv = KVBuffer.empty(cfg, 64)
        prompt = m.forward(ids[:-1], torch.arange(39), kv, logits_for="all")
        out.append((prompt, m.forward(ids[-1:], torch.tensor([39]), kv)))
    assert torch.equal(out[0][0], out[1][0])  # prefill: fp32 weights in both
    step_fp32, step_int8 = out[0][1], out[1][1]
    assert 0 < (step_int8 - step_fp32).abs().max().item() < 0.05 * step_fp32.abs().max().item()
    with pytest.raises(ValueError, match="float32 models on CPU"):
        LlamaModel(cfg, tensors, dtype=torch.bfloat16, int8_weights=True)
