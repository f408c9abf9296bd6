"""The order a user's context chunks are shown in: the order they were first seen.

Clients order context by recency or by rank: fimgate's extension moves the chunk of a file left
again at the same place to the end of its ring; retrieval (Tabby's, Continue's) ranks snippets anew
for each request. Shown in the client's order, every such move changes the prompt from the moved
chunk on: a re-anchor. Shown in the order
each chunk first arrived, a move changes nothing; chunks that have been there longest (the stable
ones) come first, a new chunk comes last, right before the file, and the ring dropping its oldest
drops the prompt's first chunk. On flask-301's holes the order itself moves edit similarity by 0.2
points (docs/benchmarks.md, bench quality, context from other files).

Per user, never across users: one person's chunks never decide another's prompt. Bounded: the
least recently used chunks are forgotten first; a forgotten chunk that comes back is new again.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from fimgate.efim.templates import ContextChunk

MAX_CHUNKS = 8192  # remembered, over all users (32-byte digests: well under a MiB)


def _digest(chunk: ContextChunk) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(chunk.path.encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    h.update(chunk.text.encode("utf-8", "surrogatepass"))
    return h.digest()


class ChunkOrder:
    def __init__(self, max_chunks: int = MAX_CHUNKS) -> None:
        self.max_chunks = max_chunks
        self._first_seen: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._next = 0

    def arrange(self, user_id: str, chunks: tuple[ContextChunk, ...]) -> tuple[ContextChunk, ...]:
        """`chunks` in the order this user's requests first carried each (ties keep theirs)."""
        keys = [(user_id, _digest(c)) for c in chunks]
        for k in keys:
            if k in self._first_seen:
                self._first_seen.move_to_end(k)
            else:
                self._first_seen[k] = self._next
                self._next += 1
        order = sorted(range(len(chunks)), key=lambda i: self._first_seen[keys[i]])
        while len(self._first_seen) > self.max_chunks:
            self._first_seen.popitem(last=False)
        return tuple(chunks[i] for i in order)

    def __len__(self) -> int:
        return len(self._first_seen)
