"""API keys decide the user; LSP settings take good values and ignore bad ones."""

import pytest

from fimgate.gateway.auth import ApiKeys, KeyError401
from fimgate.lsp.settings import LspSettings


def test_key_decides_the_user(tmp_path):
    f = tmp_path / "keys"
    f.write_text("# team keys\nk-alice alice\nk-bob bob\n")
    keys = ApiKeys.from_file(str(f))
    assert keys.user_for("Bearer k-alice") == "alice"
    with pytest.raises(KeyError401, match="invalid"):
        keys.user_for("Bearer k-mallory")
    with pytest.raises(KeyError401, match="missing"):
        keys.user_for(None)


def test_bad_key_file_is_a_clear_error(tmp_path):
    f = tmp_path / "keys"
    f.write_text("just-a-key\n")
    with pytest.raises(ValueError, match="expected 'KEY USER'"):
        ApiKeys.from_file(str(f))


def test_settings_update_keeps_old_values_for_bad_input():
    s = LspSettings().update({"fimgate": {"debounceMs": 250, "maxTokens": "lots", "gateway": "http://127.0.0.1:1"}})
    assert s.debounce_ms == 250 and s.max_tokens == LspSettings().max_tokens and s.gateway == "http://127.0.0.1:1"
    assert LspSettings().update(None) == LspSettings()
    assert LspSettings().update({"fimgate": {"debounceMs": -5}}).debounce_ms == LspSettings().debounce_ms


def test_a_probability_setting_takes_a_number_in_0_1_and_keeps_the_old_value_otherwise():
    base = LspSettings()
    assert base.update({"fimgate": {"minTokenProb": 0.35}}).min_token_prob == 0.35
    assert base.update({"fimgate": {"minTokenProb": 1}}).min_token_prob == 1.0
    for bad in (1.5, -0.1, "0.3", True, None):
        assert base.update({"fimgate": {"minTokenProb": bad}}).min_token_prob == base.min_token_prob
