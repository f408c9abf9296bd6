"""One-token steps through fimgate/kernels/llama_step.c (fimgate/backend/model/fused_step.py) must be the textbook
model's: logits of every step equal a full forward of the whole sequence computed weight by
weight, for both RoPE layouts, grouped and plain heads, head sizes off the vector width, and
int8 and bf16 linears (against their dequantized or bf16-rounded weights)."""

import dataclasses

import pytest
import torch
from gguf import GGMLQuantizationType as T

from fimgate.backend.model.fused_step import FusedStep
from fimgate.backend.model.llama import KVBuffer, LlamaModel
from fimgate.bench.engine.random_model import byte_tokenizer, quantized, random_model, tiny_config
from fimgate.kernels import cpu_build
from fimgate.kernels.int8_gemv import quantize_rows
from fimgate.kernels.llama_step import kernel_available
from fimgate.kernels.rope import RopeConfig
from tests.unit.test_fused_layers import _reference_logits

needs_kernel = pytest.mark.skipif(cpu_build.compiler() is None, reason="no C compiler: the torch layers run")


def _model(layout: str, hidden: int, heads: int, kv_heads: int, step: str = "float32", bias: bool = False):
    cfg = tiny_config(layers=3, hidden=hidden, heads=heads, kv_heads=kv_heads)
    cfg = dataclasses.replace(cfg, rope=RopeConfig(head_dim=cfg.head_dim, layout=layout), qkv_bias=bias)
    loaded = random_model(cfg, byte_tokenizer(), seed=7)
    g = torch.Generator().manual_seed(2)
    for name, w in loaded.tensors.items():  # norms that are not all ones, biases that are not all zeros
        if name.endswith("_norm"):
            w.copy_(torch.rand(w.shape, generator=g) + 0.5)
        if name.endswith("_bias"):
            w.copy_(torch.randn(w.shape, generator=g) * 0.3)
    model = LlamaModel(cfg, loaded.tensors, step_dtype=step)
    reference = dict(loaded.tensors)
    for name, w in loaded.tensors.items():  # the textbook model of what an int8 or bf16 step multiplies by
        if step != "float32" and name.rsplit(".", 1)[-1] in ("q", "k", "v", "o", "gate", "up", "down"):
            rows = quantize_rows(w)
            reference[name] = rows.q.float() * rows.scales_f32[:, None] if step == "int8" else w.to(torch.bfloat16).float()
    return model, reference


@needs_kernel
def test_the_kernel_builds_where_there_is_a_compiler():
    assert kernel_available()


@needs_kernel
@pytest.mark.parametrize(
    "layout,hidden,heads,kv_heads,step,bias",
    [
        ("neox", 64, 4, 2, "float32", True),  # Qwen2's q/k/v biases
        ("neox", 64, 4, 2, "float32", False),
        ("gptj", 72, 4, 1, "float32", False),
        ("neox", 72, 4, 4, "int8", False),
        ("gptj", 64, 4, 2, "int8", False),
        ("neox", 72, 4, 2, "bfloat16", False),
        ("gptj", 64, 4, 1, "bfloat16", False),
    ],
)
def test_steps_equal_the_textbook_model(layout, hidden, heads, kv_heads, step, bias):
    model, reference = _model(layout, hidden, heads, kv_heads, step, bias)
    assert model.fused_step is not None
    calls = []
    fused = model.fused_step

    def counting(*a):
        calls.append(1)
        return fused(*a)

    model.fused_step = counting
    ids = torch.randint(0, 256, (40,), generator=torch.Generator().manual_seed(4))
    kv = KVBuffer.empty(model.cfg, 64)
    start = 30 if step == "float32" else 3  # a prompt through the torch layers (<= 4 rows take the step copies too)
    model.forward(ids[:start], torch.arange(start), kv)
    for n in range(start, 40):
        got = model.forward(ids[n : n + 1], torch.tensor([n]), kv)
        want = _reference_logits(model, reference, ids[: n + 1])[-1]
        assert (got - want).abs().max().item() < 1e-4 * max(1.0, want.abs().max().item()), n
    assert len(calls) == 40 - start  # every step took the C kernel


@needs_kernel
def test_the_torch_layers_run_when_the_kernel_is_off():
    model, reference = _model("neox", 64, 4, 2)
    from fimgate.kernels.llama_step import KERNEL

    ids = torch.randint(0, 256, (12,), generator=torch.Generator().manual_seed(5))
    kv = KVBuffer.empty(model.cfg, 16)
    model.forward(ids[:11], torch.arange(11), kv)
    KERNEL.set_enabled(False)
    try:
        assert model.fused_step(int(ids[11]), 11, 11, kv) is None  # nothing done, nothing written
        got = model.forward(ids[11:], torch.tensor([11]), kv)
    finally:
        KERNEL.set_enabled(True)
    assert (got - _reference_logits(model, reference, ids)[-1]).abs().max().item() < 1e-4


@pytest.mark.parametrize("change", [dict(qk_norm=True), dict(sandwich_norm=True), dict(activation="gelu_tanh")])
def test_models_the_kernel_does_not_cover_take_the_torch_layers(change):
    cfg = dataclasses.replace(tiny_config(), **change)
    model = LlamaModel(cfg, random_model(cfg, byte_tokenizer()).tensors)
    assert model.fused_step is None and FusedStep.for_model(model) is None


@needs_kernel
@pytest.mark.parametrize("step", ["float32", "int8", "bfloat16"])
def test_a_batched_step_gives_each_sequence_exactly_its_step_alone(step):
    """Five sequences (more than a 4-wide tile, caches of different lengths) in one batched call:
    each row's hidden state and K/V row are bit for bit those of the same step alone."""
    model, _ = _model("neox", 72, 4, 2, step)
    g = torch.Generator().manual_seed(9)
    lengths = [3, 17, 40, 8, 25]
    kvs = [KVBuffer.empty(model.cfg, 64) for _ in lengths]
    alone = [KVBuffer.empty(model.cfg, 64) for _ in lengths]
    for n, kv, kv_alone in zip(lengths, kvs, alone):
        ids = torch.randint(0, 256, (n,), generator=g)
        model.forward(ids, torch.arange(n), kv)
        kv_alone.k.copy_(kv.k)
        kv_alone.v.copy_(kv.v)
    tokens = [int(t) for t in torch.randint(0, 256, (len(lengths),), generator=g)]
    together = model.fused_step.batch(tokens, lengths, lengths, kvs)
    for b, (tok, n) in enumerate(zip(tokens, lengths)):
        one = model.fused_step(tok, n, n, alone[b])
        assert torch.equal(together[b], one[0]), b
        assert torch.equal(kvs[b].k[:, :, n], alone[b].k[:, :, n]) and torch.equal(kvs[b].v[:, :, n], alone[b].v[:, :, n])


@needs_kernel
def test_a_step_stops_when_its_flag_is_set_and_runs_whole_otherwise():
    """Inside stoppable(), a set flag ends the step before its next layer (StepStopped); an unset
    flag changes nothing (the same hidden state as a plain step); outside, the flag is ignored."""
    from fimgate.kernels.llama_step import StepStopped

    model, _ = _model("neox", 64, 4, 2)
    kv, kv_plain = KVBuffer.empty(model.cfg, 16), KVBuffer.empty(model.cfg, 16)
    plain = model.fused_step(5, 0, 0, kv_plain)
    with model.fused_step.stoppable() as stop:
        assert torch.equal(model.fused_step(5, 0, 0, kv), plain)
        stop.value = 1
        with pytest.raises(StepStopped):
            model.fused_step(6, 1, 1, kv)
        with pytest.raises(StepStopped):
            model.fused_step.batch([6, 7], [1, 1], [1, 1], [kv, kv_plain])
        stop.value = 1
    assert stop.value == 0  # cleared on the way out
    stop.value = 1  # and not read outside
    assert torch.equal(model.fused_step(6, 1, 1, kv), model.fused_step(6, 1, 1, kv_plain))


def _quantized_model(bias: bool = True):
    """Weights in GGUF block formats, a different one per linear (as Qwen2.5's file mixes them)."""
    cfg = dataclasses.replace(tiny_config(layers=3, hidden=64, heads=4, kv_heads=2), qkv_bias=bias)
    loaded = random_model(cfg, byte_tokenizer(), seed=7)
    g = torch.Generator().manual_seed(2)
    for name, w in loaded.tensors.items():
        if name.endswith("_bias"):
            w.copy_(torch.randn(w.shape, generator=g) * 0.3)
    formats = {"q": T.Q5_0, "k": T.Q5_0, "v": T.Q8_0, "o": T.Q4_0, "gate": T.Q4_1, "up": T.Q5_1, "down": T.Q8_0, "embed": T.Q8_0}
    return LlamaModel(cfg, quantized(loaded, formats).tensors)


@needs_kernel
def test_quantized_steps_equal_the_torch_layers_on_the_same_blocks():
    """A one-token step through the C kernel reads the same blocks, with x quantized the same
    way, as the torch layers calling the quantized product linear by linear."""
    model = _quantized_model()
    assert model.quantized and model.fused_step is not None
    ids = torch.randint(0, 256, (24,), generator=torch.Generator().manual_seed(4))
    kv_fused, kv_torch = KVBuffer.empty(model.cfg, 32), KVBuffer.empty(model.cfg, 32)
    model.forward(ids[:20], torch.arange(20), kv_fused)
    model.forward(ids[:20], torch.arange(20), kv_torch)
    fused = model.fused_step
    for n in range(20, 24):
        got = model.forward(ids[n : n + 1], torch.tensor([n]), kv_fused)
        model.fused_step = None
        want = model.forward(ids[n : n + 1], torch.tensor([n]), kv_torch)
        model.fused_step = fused
        assert (got - want).abs().max().item() < 1e-4 * max(1.0, want.abs().max().item()), n


@needs_kernel
def test_a_few_prompt_tokens_in_one_call_equal_the_torch_layers():
    """forward_rows (a key's few prompt tokens in one C call: the engine's AT_ONCE_TOKENS) leaves
    the K/V the torch layers leave, each row attending only to the rows before it - so the next
    step's logits are the same - and gives the last token's logits and hidden state."""
    model = _quantized_model()
    ids = torch.randint(0, 256, (24,), generator=torch.Generator().manual_seed(5))
    kv_rows, kv_torch = KVBuffer.empty(model.cfg, 32), KVBuffer.empty(model.cfg, 32)
    model.forward(ids[:18], torch.arange(18), kv_rows)
    model.forward(ids[:18], torch.arange(18), kv_torch)
    kept = []
    got = model.forward_rows(ids[18:22].tolist(), list(range(18, 22)), kv_rows, hidden=kept)
    want = model.forward(ids[18:22], torch.arange(18, 22), kv_torch)
    assert (got - want).abs().max().item() < 1e-4 * max(1.0, want.abs().max().item())
    assert len(kept) == 1 and torch.allclose(model.head(kept[0]), got)
    assert torch.allclose(kv_rows.k[:, :, :22], kv_torch.k[:, :, :22], atol=1e-4)
    nxt = [model.forward(ids[22:23], torch.tensor([22]), kv) for kv in (kv_rows, kv_torch)]
    assert (nxt[0] - nxt[1]).abs().max().item() < 1e-4 * max(1.0, nxt[1].abs().max().item())
    assert model.forward_rows([1, 2], [23, 23], kv_rows) is None  # slots not ascending: the layers run them


@needs_kernel
def test_a_batched_quantized_step_gives_each_sequence_exactly_its_step_alone():
    model = _quantized_model()
    kvs = [KVBuffer.empty(model.cfg, 32) for _ in range(5)]
    alone = [KVBuffer.empty(model.cfg, 32) for _ in range(5)]
    together = model.fused_step.batch([1, 2, 3, 4, 5], [0] * 5, [0] * 5, kvs)
    for b in range(5):
        assert torch.equal(together[b], model.fused_step(b + 1, 0, 0, alone[b])[0])


@needs_kernel
def test_a_batched_step_reads_a_quantized_head_once_and_gives_each_row_its_own_logits():
    """step_batch on a quantized model: the head's product runs once for every row that reads it
    whole (not once a row), and each row's logits are what forward() gives that sequence alone; a
    healing row with few allowed ids computes only those (exactly: quant_linear.EXACT_ROWS)."""
    from fimgate.kernels import quant_gemv

    model = _quantized_model()
    kvs = [KVBuffer.empty(model.cfg, 32) for _ in range(3)]
    alone = [KVBuffer.empty(model.cfg, 32) for _ in range(3)]
    calls = []
    real = quant_gemv.quant_linear

    def counting(x, w, *a, **k):
        calls.append(x.shape[0])
        return real(x, w, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("fimgate.backend.model.quant_linear.quant_linear", counting)
        got = model.step_batch([7, 8, 9], [0, 0, 0], kvs, [True, False, False], [None, None, [3, 5]])
    assert calls == [2]  # the layers ran in the C step; the head once, for the 2 unconstrained rows
    for b, tok in enumerate([7, 8, 9]):
        want = model.forward(torch.tensor([tok]), torch.tensor([0]), alone[b], only_ids=[3, 5] if b == 2 else None)
        if b == 2:
            assert torch.isinf(got[b]).sum() == model.cfg.vocab_size - 2 and torch.equal(got[b][[3, 5]], want[[3, 5]])
        else:
            assert torch.equal(got[b], want)


@needs_kernel
def test_a_step_is_the_same_bits_on_one_thread_and_on_two():
    """The server sets the thread count per request from the cores free then (threads.py): the same
    step on one thread and on two must agree bit for bit, past a cache long enough that attention
    splits across threads (300 rows), or the same suggestion asked twice can differ on a near-tie."""
    model = _quantized_model()
    ids = torch.randint(0, 256, (301,), generator=torch.Generator().manual_seed(6))
    kv = KVBuffer.empty(model.cfg, 320)
    model.forward(ids[:300], torch.arange(300), kv)
    was = torch.get_num_threads()
    outs = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            copy = KVBuffer.empty(model.cfg, 320)
            copy.k.copy_(kv.k)
            copy.v.copy_(kv.v)
            outs.append(model.fused_step(int(ids[300]), 300, 300, copy))
    finally:
        torch.set_num_threads(was)
    assert torch.equal(outs[0], outs[1])


def test_a_prompt_run_layer_by_layer_with_another_sequence_between_two_layers_equals_forward():
    """What the scheduler does when a key pauses a warm-up's chunk (scheduler.py): the chunk's
    layers run with another sequence's prompt and steps run between two of them, on its own
    buffer; the chunk's logits and K/V equal forward()'s bit for bit."""
    model, _ = _model("neox", 64, 4, 2)
    g = torch.Generator().manual_seed(11)
    ids, other = torch.randint(0, 256, (30,), generator=g), torch.randint(0, 256, (20,), generator=g)
    kv_alone, kv_paused, kv_other = (KVBuffer.empty(model.cfg, 64) for _ in range(3))
    want = model.forward(ids, torch.arange(30), kv_alone)
    layers = model.forward_by_layer(ids, torch.arange(30), kv_paused)
    next(layers)
    model.forward(other, torch.arange(20), kv_other)  # another person's prompt, then their step
    model.forward(ids[:1], torch.tensor([20]), kv_other)
    got = None
    while got is None:
        try:
            next(layers)
        except StopIteration as done:
            got = done.value
    assert torch.equal(got, want)
    assert torch.equal(kv_paused.k[:, :, :30], kv_alone.k[:, :, :30]) and torch.equal(
        kv_paused.v[:, :, :30], kv_alone.v[:, :, :30]
    )
