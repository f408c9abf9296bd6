"""Streamed and plain text are the same on every HumanEval infilling problem, single- and
multi-line: the service's StreamTidy on each problem's real document, fed the reference middle
followed by the start of the suffix (so that block ends, repeated lines and overlaps with the
text after the cursor all occur), in the bundled tokenizer's pieces, as a backend streams them."""

import os

import pytest

from fimgate.bench.workloads.humaneval import FILES, default_data_dir, load
from fimgate.efim.postprocess import StreamTidy, tidy, wants_multiline

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(default_data_dir(), FILES["single-line"])),
    reason="../shared/data/humaneval-infilling is not here",
)


@pytest.mark.parametrize("dataset", ["single-line", "multi-line"])
def test_every_problem_streams_its_plain_text(dataset, smol_tok):
    problems = load(dataset)
    assert len(problems) > 1000
    for p in problems:
        text, cursor = p.prompt + p.suffix, len(p.prompt)
        raw = p.canonical + p.suffix[:120]
        pieces = [smol_tok.decode([i]) for i in smol_tok.encode(raw)]
        for multiline in {False, True, wants_multiline(text, cursor)}:
            stream = StreamTidy(text, cursor, multiline)
            shown = "".join(stream.feed(piece) for piece in pieces) + stream.finish("".join(pieces))
            assert shown == tidy("".join(pieces), text, cursor, multiline=multiline), p.task_id


@pytest.mark.parametrize("dataset", ["single-line", "multi-line"])
def test_the_first_words_show_after_a_token_or_two(dataset, smol_tok):
    """What an editor waits for before a suggestion starts to show: the tokens streamed before
    StreamTidy lets out the first text, on every problem (the reference middle in the bundled
    tokenizer's pieces, as above; at most 48, what the extension asks for). Holding back only what
    tidy() could still take back: median 2 for a line and for a body (5-6 and 12-14 when a line held
    its last len(rest) characters and a body its last two lines)."""
    counts: dict[bool, list[int]] = {False: [], True: []}
    for p in load(dataset):
        text, cursor = p.prompt + p.suffix, len(p.prompt)
        multiline = wants_multiline(text, cursor)
        pieces = [smol_tok.decode([i]) for i in smol_tok.encode(p.canonical + p.suffix[:120])][:48]
        stream, shown, at = StreamTidy(text, cursor, multiline), "", len(pieces)
        for n, piece in enumerate(pieces, 1):
            shown += stream.feed(piece)
            if shown.strip():
                at = n
                break
        counts[multiline].append(at)
    for multiline, xs in counts.items():
        xs.sort()
        assert xs[len(xs) // 2] <= 2, (multiline, xs[len(xs) // 2])
        assert xs[9 * len(xs) // 10] <= (7 if multiline else 3), (multiline, xs[9 * len(xs) // 10])


@pytest.mark.parametrize("dataset", ["single-line", "multi-line"])
def test_no_fence_chat_turn_or_prose_after_the_code_is_shown(dataset):
    """What an Instruct model goes on with after the code (llama-server's /infill answered
    "fib(n-1) + fib(n-2)\\n```\\n\\nThis code defines ..."): on every problem, the reference middle
    followed by a fence and prose, or by a chat turn, shows as the middle alone, streamed or not."""
    tails = ("\n```\n\nThis code defines a function that does what its docstring says.", "<|im_end|>\n<|im_start|>user\nthanks")
    for p in load(dataset):
        text, cursor = p.prompt + p.suffix, len(p.prompt)
        multiline = wants_multiline(text, cursor)
        want = tidy(p.canonical, text, cursor, multiline=multiline)
        for tail in tails:
            raw = p.canonical.rstrip("\n") + tail
            stream = StreamTidy(text, cursor, multiline)
            shown = "".join(stream.feed(raw[i : i + 3]) for i in range(0, len(raw), 3)) + stream.finish(raw)
            assert shown == tidy(raw, text, cursor, multiline=multiline) == want, p.task_id
            assert "```" not in shown and "<|" not in shown
