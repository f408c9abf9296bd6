"""The bundled GGUF exported as a Hugging Face folder (what vLLM serves) is the same model."""

import json

import pytest
import torch

from fimgate.backend.model.hf_export import export_hf, gptj_to_neox
from fimgate.backend.model.llama import KVBuffer
from fimgate.backend.model.registry import bundled_model_path
from fimgate.backend.model.weights import load_model

pytestmark = pytest.mark.skipif(bundled_model_path() is None, reason="bundled model not installed")


def test_gptj_to_neox_regroups_rotary_pairs_by_halves():
    # one head of 4 dims: llama.cpp rows (x0, x2, x1, x3) -> HF rows (x0, x1, x2, x3)
    w = torch.tensor([[0.0], [2.0], [1.0], [3.0]])
    assert gptj_to_neox(w, num_heads=1).flatten().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_exported_folder_gives_the_same_logits_and_tokens(tmp_path):
    from fimgate.backend.model.llama import LlamaModel

    gguf = load_model(bundled_model_path())
    out = export_hf(bundled_model_path(), str(tmp_path / "hf"), dtype=torch.float32)
    hf = load_model(out)
    cfg = json.load(open(tmp_path / "hf" / "config.json"))
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["tie_word_embeddings"] is True
    text = open(__file__, encoding="utf-8").read()
    ids = gguf.tokenizer.encode(text)[:200]
    assert hf.tokenizer.encode(text)[:200] == ids
    assert (hf.tokenizer.bos_id, hf.tokenizer.eos_id) == (gguf.tokenizer.bos_id, gguf.tokenizer.eos_id)
    logits = []
    for m in (gguf, hf):
        model = LlamaModel(m.config, m.tensors)
        logits.append(model.forward(torch.tensor(ids), torch.arange(len(ids)), KVBuffer.empty(m.config, 256)))
    assert gguf.config.rope.layout == "gptj" and hf.config.rope.layout == "neox"
    diff = (logits[0] - logits[1]).abs().max().item()
    assert diff < 1e-3, diff
