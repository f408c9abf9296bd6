"""The fixed-shape one-token step that CUDA graphs capture (forward(..., static_kv_len=B)) gives
the logits and K/V of the ordinary step, whatever stale rows lie past the position in its bucket,
with and without a sliding window. Runs on CPU; tests/unit/test_engine_cuda.py replays it as graphs."""

from dataclasses import replace

import pytest
import torch

from fimgate.backend.embedded.cuda_graphs import bucket_for
from fimgate.backend.model.llama import KVBuffer, LlamaModel
from fimgate.bench.engine.random_model import byte_tokenizer, random_model, tiny_config


@pytest.mark.parametrize("window", [None, 8])
@pytest.mark.parametrize("position", [0, 5, 127, 128, 300])
def test_static_step_matches_the_ordinary_step(window, position):
    cfg = tiny_config(layers=2)
    if window:
        cfg = replace(cfg, sliding_window=window, local_layers=(True, False))
    model = LlamaModel(cfg, random_model(cfg, byte_tokenizer(), seed=3).tensors)
    torch.manual_seed(0)
    ids = torch.randint(0, 256, (position + 1,))
    ref, kv = KVBuffer.empty(cfg, 512), KVBuffer.empty(cfg, 512)
    if position:
        model.forward(ids[:-1], torch.arange(position), ref)
    want = model.forward(ids[-1:], torch.tensor([position]), ref)
    kv.k.normal_(), kv.v.normal_()  # stale rows from someone else's request
    kv.k[:, :, :position], kv.v[:, :, :position] = ref.k[:, :, :position], ref.v[:, :, :position]
    bucket = bucket_for(position, kv.capacity)
    assert bucket > position
    got = model.forward(ids[-1:], torch.tensor([position]), kv, static_kv_len=bucket)
    assert (got - want).abs().max().item() < 1e-4
    assert (kv.k[:, :, position] - ref.k[:, :, position]).abs().max().item() < 1e-5


def test_buckets_are_powers_of_two_and_halfway_capped_by_capacity():
    assert [bucket_for(p, 4096) for p in (0, 127, 128, 191, 192, 1000, 2800, 4095)] == [128, 128, 192, 192, 256, 1024, 3072, 4096]
    assert bucket_for(3000, 3072) == 3072
