"""The embedded engine on CUDA computes what it computes on CPU: same greedy tokens, same cache
behaviour, same shifted reuse (whose re-rotation runs the Triton kernel on CUDA). A small model
with random weights (fimgate/bench/engine/random_model.py) on both devices; skipped without CUDA."""

import pytest
import torch

from fimgate.backend.base import FimPlan, Finished, ReuseHint, SamplingParams
from fimgate.backend.embedded.engine import EmbeddedEngine, EngineConfig
from fimgate.bench.engine.random_model import byte_tokenizer, random_model, tiny_config

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

TEXT = open(__file__, encoding="utf-8").read()


@pytest.fixture(scope="module")
def engines():
    loaded = random_model(tiny_config(), byte_tokenizer(), seed=1)
    return {
        d: EmbeddedEngine(loaded, EngineConfig(device=d, budget_tokens=4096, block_size=16, max_context=1024))
        for d in ("cpu", "cuda")
    }


def _run(engine, ids, user, max_tokens=16, share=None, hints=(), source=()):
    plan = FimPlan(
        prompt_ids=tuple(ids),
        user_id=user,
        session_id="doc",
        sampling=SamplingParams(max_tokens=max_tokens),
        reuse_hints=tuple(hints),
        hint_prompts=(("", tuple(source)),) if source else (),
        recompute_share=share,
    )
    return [e for e in engine.generate(plan) if isinstance(e, Finished)][0]


def test_forward_logits_match_cpu(engines):
    ids = engines["cpu"].tokenizer.encode(TEXT[:300])
    got = {}
    for d, e in engines.items():
        from fimgate.backend.model.llama import KVBuffer

        kv = KVBuffer.empty(e.model.cfg, 512, device=d)
        got[d] = e.model.forward(torch.tensor(ids, device=d), torch.arange(len(ids), device=d), kv, logits_for="all")
    diff = (got["cuda"].cpu() - got["cpu"]).abs().max().item()
    assert diff < 1e-3 * got["cpu"].abs().max().item()


def test_greedy_tokens_and_cache_hits_match_cpu(engines):
    ids = engines["cpu"].tokenizer.encode(TEXT[:400])
    out = {d: (_run(e, ids, "u"), _run(e, ids + [ids[-1]], "u")) for d, e in engines.items()}
    (cpu_cold, cpu_hot), (gpu_cold, gpu_hot) = out["cpu"], out["cuda"]
    assert gpu_cold.text == cpu_cold.text and len(gpu_cold.text) > 0
    assert gpu_hot.text == cpu_hot.text
    # one token appended (none where the slot kept the state after it: a first output token equal to
    # the repeated one; CUDA graphs keep no states)
    assert gpu_hot.usage.prefilled_tokens <= 1 and cpu_hot.usage.prefilled_tokens <= 1
    assert gpu_hot.usage.prefix_cached_tokens >= len(ids) and cpu_hot.usage.prefix_cached_tokens >= len(ids)


@pytest.mark.parametrize("share", [0.0, 0.15, 1.0])
def test_shifted_reuse_matches_cpu(engines, share):
    tok = engines["cpu"].tokenizer
    old = tok.encode(TEXT[:500])
    inserted = tok.encode("# an edit above\n")
    new = old[:100] + inserted + old[100:]
    hint = ReuseHint(100, 100 + len(inserted), 300)
    res, keys = {}, {}
    user = f"shift-{share}"
    for d, e in engines.items():
        _run(e, old, user, max_tokens=0)
        res[d] = _run(e, new, user, share=share, hints=[hint], source=old, max_tokens=0)
        slot = next(s for s in e._slots if s.user_id == user)
        keys[d] = (slot.kv.k[:, :, : len(new)].cpu(), slot.kv.v[:, :, : len(new)].cpu())
    # the re-rotated and recomputed K/V rows agree (re-rotation runs the Triton kernel on CUDA)
    for got, want in zip(keys["cuda"], keys["cpu"]):
        assert (got - want).abs().max().item() < 1e-3 * want.abs().max().item()
    for field in ("prefix_cached_tokens", "shifted_cached_tokens", "recomputed_tokens", "prefilled_tokens"):
        assert getattr(res["cuda"].usage, field) == getattr(res["cpu"].usage, field)
    assert res["cuda"].usage.shifted_cached_tokens + res["cuda"].usage.recomputed_tokens == 300
    assert (res["cuda"].usage.recomputed_tokens > 0) == (share > 0)


def test_graph_replays_match_the_ordinary_step(engines):
    from fimgate.backend.embedded.cuda_graphs import GraphedDecoder
    from fimgate.backend.model.llama import KVBuffer

    engine = engines["cuda"]
    assert engine._graphs is not None and engine._graphs.num_graphs == 2 * 7  # 2 slots x buckets 128, 192, ..., 768, 1024
    model = engine.model
    torch.manual_seed(0)
    ids = torch.randint(0, 256, (300,), device="cuda")
    ref, kv = KVBuffer.empty(model.cfg, 1024, device="cuda"), KVBuffer.empty(model.cfg, 1024, device="cuda")
    model.forward(ids[:100], torch.arange(100, device="cuda"), ref)
    kv.k[:, :, :100], kv.v[:, :, :100] = ref.k[:, :, :100], ref.v[:, :, :100]
    decoder = GraphedDecoder(model)
    for p in range(100, 300):  # crosses buckets 128, 192, 256, 384
        want = model.forward(ids[p : p + 1], torch.tensor([p], device="cuda"), ref)
        got = decoder.step(int(ids[p]), p, kv)
        assert (got - want).abs().max().item() < 1e-3 * want.abs().max().item(), p
    assert decoder.num_graphs == 4
