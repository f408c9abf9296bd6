"""Suggestions for the keys a person types instead of the suggestion's own.

A key that continues the ghost text keeps it on screen (the editor moves it along). Any other key
hides it, and VS Code asks again only after its inline-suggestion delay (50 ms, fixed for an
extension), then draws what the gateway answers: on a loaded 2-core machine ghost text came
~100 ms after such a key, and a quick typist's next key often came first.

But the answer to that key is already in the logits of this one. After the person types `c`,
the next request backs the typed fragment off (efim/fragment.py) and picks, at this same
position, the highest token that begins with what was backed off plus `c`. So with the suggestion
the gateway can send, per next character, that token's text from the cursor on:

    healing "se", the suggestion "self" shows "lf"
    alternatives: "nd" ("send": the person types "n"), "ssion" ("session"), "arch" ("search")

The editor keeps them as further items of the same suggestion; VS Code shows the one the typed
key begins at once, until the key's own answer replaces it. The pick is the next request's own
where both read the same logits: from the highest TOP logits of this step (the rows an output
head computes exactly, quant_linear.REFINE_TOP), over the tokens the healing constraint allows.
"""

from __future__ import annotations

import torch

TOP = 32  # candidates read, the highest logits of the step


def next_characters(
    logits: torch.Tensor,
    allowed: list[int] | None,
    healing: bytes,
    token_bytes: list[bytes],
    chosen: int,
    never: set[int] | frozenset[int],
    limit: int,
) -> tuple[str, ...]:
    """Up to `limit` texts from the cursor on, one per next character, highest logit first:
    each the first token that runs past `healing` (the text backed off the prompt) and begins
    with that character. Not the character `chosen` (the suggestion) begins with; no ids in
    `never` (stop and special tokens); at least one character after the typed one, and only up to
    a line's end (a key that ends a line is an Enter, which the editor indents). Only tokens
    above every allowed one that ends within `healing`, and above the token that is `healing`
    and the character alone: the next request may pick such a one, and its text is not decided
    at this step."""
    if limit <= 0:
        return ()
    if allowed is None:
        values, ids = logits.float().topk(min(TOP, logits.numel()))
    else:  # (a constraint's logits are only read at its tokens: the rest may be anything)
        pool = torch.as_tensor(allowed, dtype=torch.long)
        values, at = logits.float()[pool].topk(min(TOP, len(allowed)))
        ids = pool[at]
    ids = ids[values > float("-inf")]  # (a masked token is no one's pick)
    taken = _past(token_bytes[chosen], healing)[:1]  # ("" where the pick ends within the healing text)
    out: list[str] = []
    seen = {taken} if taken else set()
    for i in ids.tolist():
        if len(token_bytes[i]) <= len(healing):
            # a token that ends within the backed-off text outranks the rest: the next request may
            # pick it and spell what follows from a later position (its text is not decided here)
            break
        if i in never or i == chosen:
            continue
        text = _past(token_bytes[i], healing)
        if not text or text[0] in seen:
            continue
        seen.add(text[0])  # (a token that is the typed character alone, first: the next request may take it)
        if text[0] in "\r\n":
            continue
        shown = text.split("\n", 1)[0].rstrip("\r")
        if len(shown) >= 2 and shown[1:].strip():
            out.append(shown)
            if len(out) == limit:
                break
    return tuple(out)


def _past(token: bytes, healing: bytes) -> str:
    """The token's text after the healing text ("" where it does not run past it, or the rest is
    not whole UTF-8 characters)."""
    if len(token) <= len(healing) or not token.startswith(healing):
        return ""
    try:
        return token[len(healing) :].decode("utf-8")
    except UnicodeDecodeError:
        return ""
