"""Alternatives for the keys typed instead of a suggestion (fimgate/backend/embedded/alternatives.py):
per next character, the token the next request picks once that character is typed - only where
this step decides it - and their place in the decoding loop's stream."""

import torch

from fimgate.backend.base import Alternatives, CancelToken, FimPlan, HealingConstraint, SamplingParams, TextDelta
from fimgate.backend.embedded.alternatives import next_characters
from fimgate.backend.embedded.constraint import TextPrefixIndex
from fimgate.backend.embedded.decode_loop import decode, stepped

VOCAB = [
    b"<eos>",
    b" self",
    b" send",
    b" return",
    b" x",
    b" xs",
    b" None",
    b"zzz",
    b" ",
    b" r",
    b" rest",
    b" reply",
    b" foo\n",
    b"\n",
]
ID = {b: i for i, b in enumerate(VOCAB)}


def _logits(scores: dict[bytes, float]) -> torch.Tensor:
    x = torch.full((len(VOCAB),), float("-inf"))
    for b, s in scores.items():
        x[ID[b]] = s
    return x


def _allowed(healing: bytes) -> list[int]:
    return TextPrefixIndex(VOCAB, {0}).allowed_ids(healing)


def test_one_text_per_next_character_from_the_cursor_on_highest_first():
    # after "x = " the space is backed off: the model picks " self"; a person who types "r" or "N" instead
    scores = {b" self": 9, b" send": 8.5, b" return": 8, b" x": 7, b" xs": 6.5, b" None": 6, b"zzz": 100}
    got = next_characters(_logits(scores), _allowed(b" "), b" ", VOCAB, ID[b" self"], {0}, limit=8)
    # "send" begins as the suggestion does; "x" alone is the next request's own pick after an "x"
    # (its " xs" is not decided here); "zzz" is not allowed (a constraint's other logits are anything)
    assert got == ("return", "None")
    assert next_characters(_logits(scores), _allowed(b" "), b" ", VOCAB, ID[b" self"], {0}, limit=1) == ("return",)


def test_nothing_past_a_token_that_ends_within_the_backed_off_text():
    # healing " re": " r" (a strict beginning of it) outranks " reply", so after "p" the next request
    # may spell " r" + "eply"... from a later position: not decided at this step
    scores = {b" return": 10, b" rest": 9.5, b" r": 9, b" reply": 8}
    got = next_characters(_logits(scores), _allowed(b" re"), b" re", VOCAB, ID[b" return"], {0}, limit=8)
    assert got == ("st",)
    scores[b" r"] = 11  # the pick itself ends within it: nothing is decided here
    assert next_characters(_logits(scores), _allowed(b" re"), b" re", VOCAB, ID[b" r"], {0}, limit=8) == ()


def test_within_one_line_never_a_stop_or_special_token():
    scores = {b" x": 9, b" foo\n": 8, b"\n": 7, b"<eos>": 12}
    got = next_characters(_logits(scores), None, b"", VOCAB, ID[b" x"], {0}, limit=8)
    assert got == ()  # every candidate begins with the suggestion's " "...
    got = next_characters(_logits(scores), _allowed(b" "), b" ", VOCAB, ID[b" x"], {0}, limit=8)
    assert got == ("foo",)  # ... past the backed-off space: "foo" up to its line's end; "\n" is an Enter


def _events(scores: list[dict[bytes, float]], healing: str, **sampling):
    plan = FimPlan(
        prompt_ids=(1,), user_id="u", session_id="s", healing=HealingConstraint(healing), sampling=SamplingParams(**sampling)
    )
    out = []
    steps = iter(scores[1:])
    gen = decode(plan, _logits(scores[0]), VOCAB, TextPrefixIndex(VOCAB, {0}), 0, 8, CancelToken())
    for ev in stepped(gen, lambda tok, argmax_only, only_ids: _logits(next(steps))):
        out.append(ev)
    return out


def test_the_loop_sends_them_once_before_the_text_from_the_step_past_the_cursor():
    first = {b" self": 9, b" return": 8, b" None": 7}
    evs = _events([first, {b"<eos>": 9}], " ", max_tokens=4, alternatives=4)
    assert evs == [Alternatives(("return", "None")), TextDelta("self")]
    # the pick is the backed-off text itself: the cursor is passed at the next step, whose logits tell
    evs = _events(
        [{b" ": 9, b" self": 8}, {b"zzz": 9, b" None": 8, b" self": 7}, {b"<eos>": 9}], " ", max_tokens=4, alternatives=4
    )
    assert evs == [Alternatives((" None",)), TextDelta("zzz")]


def test_only_when_asked_and_only_for_greedy_picks():
    first = {b" self": 9, b" return": 8, b" None": 7}
    assert _events([first, {b"<eos>": 9}], " ", max_tokens=4) == [TextDelta("self")]
    sampled = _events([first, {b"<eos>": 9}], " ", max_tokens=4, alternatives=4, temperature=0.5, seed=1)
    assert not any(isinstance(e, Alternatives) for e in sampled)
