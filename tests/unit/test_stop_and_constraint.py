"""Stop strings never leak a partial stop; healing constraints allow exactly the consistent tokens."""

from fimgate.backend.embedded.constraint import TextPrefixIndex
from fimgate.backend.embedded.stop import StopStrings


def test_stop_string_split_across_tokens_is_held_back_then_cut():
    s = StopStrings(("\ndef ",))
    out = s.feed(b"x = 1") + s.feed(b"\nde")
    assert out == "x = 1"  # "\nde" might start the stop string
    out += s.feed(b"f foo")
    assert s.stopped and out == "x = 1" and s.text == "x = 1"


def test_held_text_is_released_when_it_is_not_a_stop():
    s = StopStrings(("\n\n",))
    assert s.feed(b"a\n") == "a"
    assert s.feed(b"b") == "\nb"
    assert s.flush() == ""


def test_utf8_split_across_tokens_waits_for_the_whole_character():
    s = StopStrings(())
    e = "é".encode()
    assert s.feed(e[:1]) == ""
    assert s.feed(e[1:]) == "é"


def test_allowed_tokens_agree_with_the_remaining_text():
    vocab = [b"r", b"re", b"ret", b"return", b"x", b" ret", b"retu", b"rex", b""]
    idx = TextPrefixIndex(vocab)
    allowed = {vocab[i] for i in idx.allowed_ids(b"ret")}
    assert allowed == {b"r", b"re", b"ret", b"return", b"retu"}


def test_remembered_answers_are_the_lookups_and_the_memory_is_bounded():
    from fimgate.backend.embedded import constraint

    vocab = [b"r", b"re", b"ret", b"return", b"x", b" ret", b"retu", b"rex"]
    idx = TextPrefixIndex(vocab)
    texts = [b"r", b"re", b"ret", b"retu", b"x", b" r", b"q"] * 2
    assert [idx.allowed_ids(t) for t in texts] == [idx._lookup(t) for t in texts]
    for i in range(200):
        idx.allowed_ids(b"r" + str(i).encode())
    assert idx.memo_ids <= constraint.MEMO_IDS


def test_kept_answers_are_bounded_by_the_ids_they_hold_not_their_count(monkeypatch):
    """A vocabulary of Qwen2.5's size: each bare-space answer holds most of it; the memo keeps
    what fits in MEMO_IDS and drops the oldest, whatever the answers' sizes."""
    from fimgate.backend.embedded import constraint

    monkeypatch.setattr(constraint, "MEMO_IDS", 50_000)
    vocab = [b" " + str(i).encode() for i in range(40_000)] + [b"x" + str(i).encode() for i in range(1000)]
    idx = TextPrefixIndex(vocab)
    for text in (b" ", b" 1", b" 2", b" ", b"x"):
        assert idx.allowed_ids(text) == idx._lookup(text)
        assert idx.memo_ids <= 50_000 and idx.memo_ids == sum(len(v) for v in idx._memo.values())
