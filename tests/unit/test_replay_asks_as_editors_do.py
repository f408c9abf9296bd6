"""bench replay stands for the editors: it asks with what the VS Code extension and `fimgate lsp`
ask for by default, so its figures are theirs."""

import json

from fimgate.bench.replay.simulate import REPLAY_SAMPLING
from fimgate.lsp.settings import LspSettings
from tests.conftest import ROOT


def test_replay_sampling_is_the_extensions_and_the_lsps_defaults():
    with open(f"{ROOT}/vscode-extension/package.json", encoding="utf-8") as f:
        props = json.load(f)["contributes"]["configuration"]["properties"]
    assert REPLAY_SAMPLING.max_tokens == props["fimgate.maxTokens"]["default"] == LspSettings().max_tokens
    assert REPLAY_SAMPLING.max_predict_ms == props["fimgate.maxPredictMs"]["default"] == LspSettings().max_predict_ms
    assert REPLAY_SAMPLING.min_token_prob == props["fimgate.minTokenProb"]["default"] == LspSettings().min_token_prob
