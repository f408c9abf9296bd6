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
"""

from __future__ import annotations

from dataclasses import dataclass

from fimgate.backend.base import HealingConstraint, Tokenizer

MAX_HEAL_CHARS = HealingConstraint.MAX_CHARS


@dataclass(frozen=True)
class Fragment:
    ids: tuple[int, ...]
    heal: str  # text backed off the end; generation must start with it


def stable_split(tok: Tokenizer, text: str) -> int:
    """Offset where text's last pre-token starts: tokens before it never change when text grows."""
    if not text:
        return 0
    starts = tok.pretoken_starts(text)
    return starts[-1] if starts else 0


def tokenize_fragment(tok: Tokenizer, text: str) -> Fragment:
    """ids of text up to its last pre-token, and that pre-token as the text to heal. A last
    pre-token over MAX_HEAL_CHARS (a long run of letters) is cut at one of its own token
    boundaries, so that at most MAX_HEAL_CHARS are healed: healing costs a decode step per
    token it re-spells, and no client's text may buy an unbounded number of them."""
    split = stable_split(tok, text)
    if len(text) - split <= MAX_HEAL_CHARS:
        if not split:
            return Fragment(ids=(), heal=text)
        ids, starts = tok.encode_with_starts(text)
        return Fragment(ids=tuple(i for i, s in zip(ids, starts) if s < split), heal=text[split:])
    ids, starts = tok.encode_with_starts(text)
    cut = next((s for s in starts if s >= len(text) - MAX_HEAL_CHARS), len(text))
    return Fragment(ids=tuple(i for i, s in zip(ids, starts) if s < cut), heal=text[cut:])
