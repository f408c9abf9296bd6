"""Fragment tokenization: tokenize text that ends at the cursor, where the last token may be cut.

A person mid-word ("ret|") has typed a fragment of a token the model would see whole
("return"). Feeding the fragment shows the model a split it never saw in training. Instead we
back off the last pre-token (the piece the pre-tokenizer would still grow if more text came)
and ask the backend to generate text that starts with it (token healing):

    text  "    x = compute_tot"      pre-tokens: "   " | " x" | " =" | " compute" | "_" | "tot"
    ids   tokens("    x = compute_")  heal "tot"   -> the model writes "total(...)", we show "al(...)"

Why this is exact: regex pre-tokenizers match left to right, so appending text can only change
the last pre-token; BPE never merges across pre-tokens. So the tokens of the earlier pre-tokens,
*as cut within the whole text*, are a prefix of the tokens of any continuation, and `ids` +
(tokens spelling `heal`) can always reproduce it. Re-encoding text[:split] alone would not do:
a regex lookahead at the end of a string cuts differently ("\n\n\n" alone is one piece, but
"\n\n" + "\n" before "c").

One exception, for the cursor after a line's indentation (after Enter, as editors auto-indent):
the pre-tokenizers of byte-level BPE models give a run of spaces' last space to the word after
it ("        self" is "       " | " self"), so healing the whole run lets a greedy pick spell it
with tokens the model never saw there (Qwen2.5-Coder, 3 spaces then one at a time: 48 tokens of
spaces, nothing shown). A last pre-token of two or more whitespace characters is cut where the
pre-tokenizer would cut it before a word (`_before_a_word`): the run less that space in the
prompt, the space healed. Exact when a word follows, as the person types one next; inside a
run that goes on (a cursor within indentation) the prompt is cut as if a word came.
"""

from __future__ import annotations

from dataclasses import dataclass

from fimgate.backend.base import HealingConstraint, Tokenizer

MAX_HEAL_CHARS = HealingConstraint.MAX_CHARS


@dataclass(frozen=True)
class Fragment:
    ids: tuple[int, ...]
    heal: str  # text backed off the end; generation must start with it


_WORD = "x"  # a word typed after the text: where the pre-tokenizer cuts a run of spaces before it


def stable_split(tok: Tokenizer, text: str) -> int:
    """Offset where text's last pre-token starts: tokens before it never change when text grows
    (when it grows by a word, after a run of spaces: `_before_a_word`)."""
    return _cut(tok, text)[0]


def _cut(tok: Tokenizer, text: str) -> tuple[int, str]:
    """(stable_split, the text whose tokens before it are the prompt's: `text`, or with a word
    after it where the cut is inside a run of spaces)."""
    if not text:
        return 0, text
    starts = tok.pretoken_starts(text)
    split = starts[-1] if starts else 0
    tail = text[split:]
    if len(tail) < 2 or not tail.isspace():
        return split, text
    return _before_a_word(tok, text, split)


def _before_a_word(tok: Tokenizer, text: str, split: int) -> tuple[int, str]:
    """A last pre-token of 2+ whitespace characters: cut where the pre-tokenizer cuts it once a word
    follows (before the space that joins the word), if it does."""
    probe = text + _WORD
    starts = tok.pretoken_starts(probe)
    word = starts[-1] if starts else 0
    return (word, probe) if split < word < len(text) else (split, text)


def tokenize_fragment(tok: Tokenizer, text: str) -> Fragment:
    """ids of text up to its last pre-token, and that pre-token as the text to heal. A last
    pre-token over MAX_HEAL_CHARS (a long run of letters) is cut at one of its own token
    boundaries, so that at most MAX_HEAL_CHARS are healed: healing costs a decode step per
    token it re-spells, and no client's text may buy an unbounded number of them."""
    split, cut_in = _cut(tok, text)
    if len(text) - split <= MAX_HEAL_CHARS:
        if not split:
            return Fragment(ids=(), heal=text)
        ids, starts = tok.encode_with_starts(cut_in)
        return Fragment(ids=tuple(i for i, s in zip(ids, starts) if s < split), heal=text[split:])
    ids, starts = tok.encode_with_starts(text)
    cut = next((s for s in starts if s >= len(text) - MAX_HEAL_CHARS), len(text))
    return Fragment(ids=tuple(i for i, s in zip(ids, starts) if s < cut), heal=text[cut:])
