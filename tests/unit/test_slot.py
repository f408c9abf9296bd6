"""A slot's kept hidden states (fimgate/backend/embedded/slot.py): a state is found only while every
token up to its position is what it was when computed, so a prompt that differs before its end,
or a token that differs at its position, is computed again."""

import torch

from fimgate.backend.embedded.slot import MAX_HIDDEN, Slot


def _states(n: int) -> list[torch.Tensor]:
    return [torch.full((4,), float(i)) for i in range(n)]


def test_the_state_after_a_prompt_is_found_only_where_the_slot_holds_its_last_token():
    """The engine asks for the state at a prompt's end only when the slot's tokens begin with the
    whole prompt (its common prefix with them, from _take_slot): here, that the position and token
    must match."""
    s = Slot(kv=None)
    s.extend([5, 6, 7, 8], _states(4))
    assert torch.equal(s.state_after(2, 7), _states(3)[2])  # a prompt [5, 6, 7]: ending inside what the slot holds
    assert s.state_after(2, 9) is None  # [5, 6, 9]: differs at its last token
    assert s.state_after(4, 9) is None  # [5, 6, 7, 8, 9]: longer than what the slot holds


def test_a_token_is_read_from_its_state_only_where_the_slot_holds_that_token():
    s = Slot(kv=None)
    s.extend([5, 6, 7], _states(3))
    assert torch.equal(s.state_after(1, 6), _states(2)[1])
    assert s.state_after(1, 7) is None and s.state_after(3, 8) is None


def test_a_slot_cut_to_a_common_prefix_and_extended_keeps_only_the_states_before_the_cut():
    s = Slot(kv=None)
    s.extend([5, 6, 7, 8], _states(4))
    s.cut(2)  # the next prompt is [5, 6, 9]: rows 2.. are being overwritten
    s.extend([9], None)
    assert s.tokens == [5, 6, 9] and s.state_after(1, 6) is not None
    assert s.state_after(2, 9) is None and s.state_after(2, 7) is None
    s.extend([10], _states(1))  # the state of the new token at position 3
    assert s.state_after(3, 10) is not None and s.state_after(2, 9) is None


def test_cutting_drops_the_states_past_the_cut():
    s = Slot(kv=None)
    s.extend([5, 6, 7, 8], _states(4))
    s.cut(2)
    assert s.tokens == [5, 6] and s.state_after(1, 6) is not None and s.state_after(2, 7) is None
    s.clear("someone else")
    assert s.tokens == [] and not s.hidden and s.user_id == "someone else"


def test_a_slot_keeps_at_most_max_hidden_states_the_latest_positions():
    s = Slot(kv=None)
    s.extend(list(range(MAX_HIDDEN + 10)), _states(MAX_HIDDEN + 10))
    assert len(s.hidden) == MAX_HIDDEN and min(s.hidden) == 10
