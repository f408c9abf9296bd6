"""UTF-16 (LSP) positions and code-point offsets agree, with CRLF, tabs and astral characters."""

from hypothesis import given
from hypothesis import strategies as st

from fimgate.efim.offsets import offset_to_position, position_to_offset

TEXT = "a😀b\r\n\tçé = '😀'\r\nlast"


def test_astral_characters_count_two_utf16_units():
    assert offset_to_position(TEXT, 2) == (0, 3)  # after "a😀"
    assert position_to_offset(TEXT, 0, 3) == 2
    assert position_to_offset(TEXT, 1, 0) == TEXT.index("\t")
    assert position_to_offset(TEXT, 2, 4) == len(TEXT)


def test_out_of_range_positions_clamp():
    assert position_to_offset(TEXT, 0, 99) == TEXT.index("\r")
    assert position_to_offset(TEXT, 99, 0) == len(TEXT)


@given(st.text(alphabet=st.sampled_from(list("ab \t\r\n😀é")), max_size=40), st.data())
def test_round_trip(text, data):
    offset = data.draw(st.integers(0, len(text)))
    if offset > 0 and text[offset - 1] == "\r" and text[offset : offset + 1] == "\n":
        offset -= 1  # the middle of a CRLF is not a position an editor can hold
    line, ch = offset_to_position(text, offset)
    assert position_to_offset(text, line, ch) == offset
