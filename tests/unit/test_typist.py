"""The accepting typist (fimgate/bench/typist/): it takes only what the person would type, as VS Code's
Tab and accept-word take it, when ghost text has been on screen long enough, and skips the keys taken."""

from __future__ import annotations

import math

import pytest

from fimgate.bench.typist.person import Person
from fimgate.bench.typist.rule import LLAMA_VSCODE, accept, next_word_end, space_word_end
from fimgate.bench.typist.script import Step, steps_of


def test_whole_suggestion_taken_with_tab_when_the_next_text_starts_with_it():
    a = accept("return a + b", "return a + b\nprint(x)")
    assert (a.chars, a.presses, a.kind) == (12, 1, "whole")


@pytest.mark.parametrize(
    "shown, upcoming",
    [
        ("return a - b", "return a + b"),  # wrong after "return a ": words only, never the wrong part
        ("foo(bar)", "foo(baz)"),
        ("x = compute()", "y = compute()"),
    ],
)
def test_never_takes_text_the_person_would_not_type(shown, upcoming):
    a = accept(shown, upcoming)
    if a is not None:
        assert upcoming.startswith(shown[: a.chars])
        assert a.kind == "words" and a.chars < len(shown)


def test_accept_word_stops_at_the_first_wrong_word():
    a = accept("return a - b", "return a + b")
    # VS Code's presses: "return", " ", "a", " " - then "-" is not what the person types
    assert shown_taken("return a - b", a) == "return a "
    assert a.presses == 4


def test_nothing_taken_when_the_first_word_is_wrong_or_it_saves_no_key():
    assert accept("self.url", "request.url") is None
    assert accept("(", "(x)") is None  # one press for one key
    assert accept("   \n", "   \nx") is None  # white space only is not a suggestion


def test_auto_indent_is_nobodys_key():
    # "\n" + the editor's indent: one key of the person's, taken with one press - no saving
    assert accept("\n    ", "\n    return", keys=lambda n: 1 if n > 0 else 0) is None
    a = accept("\n    return", "\n    return x", keys=lambda n: 1 + max(0, n - 5))
    assert a is not None and a.chars == 11


def test_next_word_end_follows_vscode():
    assert next_word_end("self.url") == 4  # a word
    assert next_word_end(".url") == 1  # punctuation up to the next word
    assert next_word_end("  x") == 2  # white space first
    assert next_word_end("\n    return") == 5  # a newline and its indent: one press


def test_llama_vscode_takes_one_space_separated_word_a_suggestion():
    assert space_word_end("self.url = url") == 8  # up to the space: "self.url"
    assert space_word_end("    return x") == 10  # its leading spaces and the word
    assert space_word_end("\n    return x") == 11  # an empty first line: the newline and the next line's word
    a = accept("self.url = url", "self.url = base", words=LLAMA_VSCODE)
    assert (a.chars, a.presses) == (8, 1)  # one press: a second would insert "self.url" again
    assert accept("self.url = url", "self.uri", words=LLAMA_VSCODE) is None


def shown_taken(shown, a):
    return shown[: a.chars]


# -- the person over a script, with a scripted model --


def keys(file: str, text: str, t0: float = 0.0, gap: float = 100.0) -> list[Step]:
    return [Step("key", t0 + i * gap, file, text=c) for i, c in enumerate(text)]


class Model:
    """Answers at a fixed latency with what follows the cursor in `truth`, cut to `length` chars."""

    def __init__(self, truth: str, latency_ms: float, length: int = 8) -> None:
        self.truth, self.latency_ms, self.length = truth, latency_ms, length

    def answer(self, ask) -> str:
        before = ask.text[: ask.cursor]
        assert self.truth.startswith(before)
        return self.truth[ask.cursor : ask.cursor + self.length]


def run(person: Person, model: Model, lose_prefetches: bool = False) -> None:
    """A screen that shows each answer `latency_ms` after its ask, unless superseded."""
    pending = []
    while not person.done:
        while due := sorted((p for p in pending if p[0] <= person.next_ms()), key=lambda p: p[0]):
            at, ask = due[0]
            pending.remove((at, ask))
            if ask.prefetch and lose_prefetches:
                pending += [(at + model.latency_ms, a) for a in person.lost(ask, at)]
                continue
            pending += [(at + model.latency_ms, a) for a in person.show(ask, model.answer(ask), at)]
        _, asks = person.act()
        pending += [(a.t_ms + model.latency_ms, a) for a in asks if not a.warmup]


def test_a_right_suggestion_on_screen_long_enough_is_taken_and_its_keys_skipped():
    truth = "abcdefghijklmnopqrstuvwxyz"
    steps = [Step("open", 0.0, "f.py", text="")] + keys("f.py", truth, t0=100.0, gap=400.0)
    p = Person(steps, reaction_ms=300)
    run(p, Model(truth, latency_ms=50))
    s = p.summary()
    assert p.docs["f.py"] == truth  # the document is what the trace typed
    assert s["chars_not_typed"] > 0 and s["keys_typed"] + s["chars_not_typed"] == len(truth)
    assert s["time_ms"] < s["time_typing_all_ms"]
    for _, taken in s["taken"]:
        assert taken in truth


def test_a_fast_typist_takes_nothing_it_saw_too_briefly():
    truth = "abcdefghij"
    steps = [Step("open", 0.0, "f.py", text="")] + keys("f.py", truth, t0=100.0, gap=100.0)
    p = Person(steps, reaction_ms=300)
    # each answer is wrong from its second character: typing along never keeps it on screen
    model = Model(truth, latency_ms=20, length=8)
    model.answer = lambda ask: truth[ask.cursor] + "Z" * 7 if ask.cursor < len(truth) else ""
    run(p, model)
    assert p.summary()["chars_not_typed"] == 0
    assert p.docs["f.py"] == truth


def test_wrong_suggestions_are_never_taken():
    truth = "def add(a, b):\n    return a + b\n"
    wrong = "def sub(x, y):\n    return x - y\n"
    steps = [Step("open", 0.0, "f.py", text="")] + keys("f.py", truth, t0=100.0, gap=500.0)
    p = Person(steps, reaction_ms=0)
    model = Model(truth, latency_ms=10)
    model.answer = lambda ask: wrong[ask.cursor : ask.cursor + 6] if ask.cursor < len(wrong) else ""
    run(p, model)
    assert p.docs["f.py"] == truth
    for _, taken in p.summary()["taken"]:
        assert taken in truth  # only where the wrong text happens to agree


def test_an_answer_for_an_older_document_is_not_shown():
    truth = "abcdefgh"
    steps = [Step("open", 0.0, "f.py", text="")] + keys("f.py", truth, t0=100.0, gap=200.0)
    p = Person(steps, reaction_ms=0)
    run(p, Model(truth, latency_ms=250))  # every answer comes after the next key
    assert p.summary()["chars_not_typed"] <= 1  # only the last key's answer, with no key after it
    assert p.docs["f.py"] == truth


def test_tab_to_next_ghost_text_is_measured_from_the_accept():
    truth = "abcdefghijklmnopqrstuvwxyz"
    steps = [Step("open", 0.0, "f.py", text="")] + keys("f.py", truth, t0=100.0, gap=400.0)
    p = Person(steps, reaction_ms=0)
    run(p, Model(truth, latency_ms=30, length=4))
    tab = p.summary()["tab_to_next_ghost_ms"]
    assert tab["accepts"] >= 1 and tab["p50"] == pytest.approx(30.0)


def test_prefetch_has_the_next_suggestion_on_screen_when_the_tab_lands():
    truth = "abcdefghijklmnopqrstuvwxyz"
    steps = [Step("open", 0.0, "f.py", text="")] + keys("f.py", truth, t0=100.0, gap=400.0)
    p = Person(steps, reaction_ms=300, prefetch=True)
    run(p, Model(truth, latency_ms=30, length=4))
    s = p.summary()
    assert p.docs["f.py"] == truth
    assert s["prefetch_hits"] >= 1 and s["tab_to_next_ghost_ms"]["p50"] == 0.0
    # without it, each accept waits for its own request
    q = Person(steps, reaction_ms=300)
    run(q, Model(truth, latency_ms=30, length=4))
    assert q.summary()["tab_to_next_ghost_ms"]["p50"] == pytest.approx(30.0)
    assert s["chars_not_typed"] >= q.summary()["chars_not_typed"]


def test_a_lost_prefetch_leaves_the_accept_to_ask_again():
    truth = "abcdefghijklmnopqrstuvwxyz"
    steps = [Step("open", 0.0, "f.py", text="")] + keys("f.py", truth, t0=100.0, gap=400.0)
    p = Person(steps, reaction_ms=0, prefetch=True)
    run(p, Model(truth, latency_ms=30, length=4), lose_prefetches=True)
    tab = p.summary()["tab_to_next_ghost_ms"]
    # (taken at once: the prefetch, lost 30 ms later, is asked for again, and comes 30 ms after that)
    assert p.summary()["prefetch_hits"] == 0 and tab["p50"] == pytest.approx(60.0)


def test_steps_of_keeps_auto_indent_with_its_key_and_cuts_long_gaps():
    events = [
        {"type": "open", "file": "f.py", "text": "", "t": 0},
        {"type": "insert", "file": "f.py", "offset": 0, "text": ":", "t": 100},
        {"type": "insert", "file": "f.py", "offset": 1, "text": "\n", "t": 10_000},
        {"type": "insert", "file": "f.py", "offset": 2, "text": "    ", "auto": True, "t": 10_005},
        {"type": "insert", "file": "f.py", "offset": 6, "text": "x", "t": 10_200},
    ]
    steps = steps_of(events, keys=10)
    assert [(s.op, s.text, s.then) for s in steps] == [
        ("open", "", ""),
        ("key", ":", ""),
        ("key", "\n", "    "),
        ("key", "x", ""),
    ]
    assert [s.t_ms for s in steps] == [0, 100, 2100, 2300]  # the 9.9 s pause cut to 2 s; x 200 ms after Enter
    assert steps_of(events, keys=1)[-1].text == ":"
    assert math.isinf(Person(steps).next_ms()) is False
