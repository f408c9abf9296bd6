"""Draft tokens for speculative decoding: what followed the latest tokens where they last appeared.

Code repeats itself, and a person types along the suggestion they were just shown. So the
tokens after the last few generated ones are often already written somewhere: in the session's
previous suggestion (searched first: its remainder is what the person was typing into) or in
the prompt and the output so far (prompt lookup, as llama.cpp's lookup decoding and vLLM's
n-gram proposer do). A draft is only a guess: the engine runs it as extra rows of the next
one-token step and keeps the tokens greedy decoding would have picked anyway
(fimgate/backend/embedded/decode_loop.py), so what is decoded never changes - only how many
forwards it takes.

Searches run over the token ids packed as bytes (bytes.rfind, in C): ~50 us over a 4k-token
prompt.

    lookup = PromptLookup(prompt_ids, previous_output_ids, max_draft=4)
    lookup.propose(output_ids_so_far)   # -> [tokens], possibly []
"""

from __future__ import annotations

from array import array

MAX_NGRAM = 4  # the longest run of latest tokens looked for
MIN_NGRAM_PROMPT = 3  # in the prompt, shorter runs recur too often to predict what follows them


def _pack(ids) -> bytes:
    return array("i", ids).tobytes()


class PromptLookup:
    def __init__(self, prompt: list[int] | tuple[int, ...], previous: tuple[int, ...] = (), max_draft: int = 4) -> None:
        self._prompt_bytes = _pack(prompt)  # packed once: each step packs only the output
        self._prompt_tail = list(prompt[-MAX_NGRAM:])
        self._previous = list(previous)
        self._previous_bytes = _pack(self._previous)
        self.max_draft = max_draft

    def propose(self, output: list[int], limit: int | None = None) -> list[int]:
        """Up to max_draft (and `limit`) tokens to try after `output` (the tokens generated so far)."""
        k = self.max_draft if limit is None else min(self.max_draft, limit)
        if k <= 0:
            return []
        tail = (self._prompt_tail + output)[-MAX_NGRAM:]  # the latest tokens, prompt's and output's
        for n in range(len(tail), 0, -1):
            found = _find_last(self._previous_bytes, _pack(tail[-n:]), len(self._previous) - 1)
            if found is not None:
                return self._previous[found + n : found + n + k]
        haystack = self._prompt_bytes + _pack(output)
        length = len(haystack) // 4
        for n in range(min(len(tail), length - 1), MIN_NGRAM_PROMPT - 1, -1):
            found = _find_last(haystack, _pack(tail[-n:]), length - 1)  # a run that something follows
            if found is not None:
                return array("i", haystack[(found + n) * 4 : (found + n + k) * 4]).tolist()
        return []


def _find_last(haystack: bytes, needle: bytes, end_tokens: int) -> int | None:
    """The token index of the last occurrence of `needle` that ends before token `end_tokens`."""
    end = end_tokens * 4
    while end > 0:
        at = haystack.rfind(needle, 0, end)
        if at < 0:
            return None
        if at % 4 == 0:
            return at // 4
        end = at + len(needle) - 1  # a match across token boundaries: look further back
    return None
