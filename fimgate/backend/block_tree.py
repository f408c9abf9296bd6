"""Per-user radix trees of fixed-size token blocks, one global block budget, LRU eviction, pins.

Why a tree per user: a request may only ever match KV that its own user computed, so timing
cannot reveal what another user typed. A deployment may map several users to one tenant
namespace to share repository context; the engine decides the namespace, the tree just keys
roots by it.

    root(user A) ─ [b0: 16 tokens] ─ [b1] ─ [b2: 5 tokens, partial leaf]
                                   └ [b1']
    root(user B) ─ [b0'] ...

Each node holds up to `block_size` tokens and one storage block id. Only leaves may be
partial; a partial leaf grows in place when a later insert extends it. Matching is token
granular: a prompt that diverges inside a block still reuses that block's first tokens,
because a token's KV depends only on the tokens before it.

Eviction is LRU over unpinned leaves across all users. Every touch moves a whole root->leaf
path to the recent end of one ordered map, parents before children, so walking that map from
its old end and taking the first unpinned leaf is exactly least-recently-used. `eviction=
"random"` picks a uniformly random unpinned leaf instead (seeded): the baseline policies are
measured against.

Pins hold a path (lock_ref > 0 on every node of it) until unpinned by receipt or until their
time-to-live passes. Pinned blocks may take at most `pin_cap_share` of the budget; a pin that
would pass the cap releases the oldest pins first. This module imports no torch: storage is
just an integer block id the engine maps to memory.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from fimgate.backend.base import PinReceipt


class _Node:
    __slots__ = ("tokens", "block_id", "parent", "children", "lock_ref", "pin_ref", "user_id")

    def __init__(self, tokens: tuple[int, ...], block_id: int | None, parent: "_Node | None", user_id: str) -> None:
        self.tokens = tokens
        self.block_id = block_id
        self.parent = parent
        self.children: dict[tuple[int, ...], _Node] = {}
        self.lock_ref = 0  # pins + requests inserting below it: evictable only at 0
        self.pin_ref = 0  # pins alone, for the pinned-share accounting
        self.user_id = user_id

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class MatchResult:
    num_tokens: int
    # (block_id, num_tokens used from it) in prompt order
    blocks: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class BlockWrite:
    """Tokens prompt[start:start+num_tokens] must be written into block `block_id` at `offset`."""

    block_id: int
    start: int
    offset: int
    num_tokens: int


def common_prefix(a, b) -> int:
    """Length of the longest common prefix of two sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class BlockTree:
    def __init__(
        self,
        num_blocks: int,
        block_size: int = 16,
        pin_cap_share: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        eviction: str = "lru",
        seed: int = 0,
    ) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be positive")
        if eviction not in ("lru", "random"):
            raise ValueError(f"unknown eviction {eviction!r}; expected 'lru' or 'random'")
        self.eviction = eviction
        self._rng = random.Random(seed)
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.pin_cap_blocks = int(num_blocks * pin_cap_share)
        self._clock = clock
        self._free = list(range(num_blocks - 1, -1, -1))
        self._roots: dict[str, _Node] = {}
        self._lru: OrderedDict[_Node, None] = OrderedDict()
        self._pins: OrderedDict[int, tuple[PinReceipt, list[_Node]]] = OrderedDict()
        self._pin_ids = itertools.count(1)
        self.num_evicted = 0
        self._num_pinned = 0  # nodes with pin_ref > 0, kept as pins come and go (read on every re-pin)

    # -- accounting ------------------------------------------------------------------------
    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self._free)

    @property
    def num_pinned(self) -> int:
        return self._num_pinned

    def num_user_blocks(self, user_id: str) -> int:
        return sum(1 for n in self._lru if n.user_id == user_id)

    @property
    def num_users(self) -> int:
        return sum(1 for r in self._roots.values() if r.children)

    # -- lookup ----------------------------------------------------------------------------
    def _walk(self, user_id: str, tokens: tuple[int, ...]) -> tuple[list[_Node], int]:
        """The deepest path matching `tokens`; the last node may match only partially."""
        node = self._roots.get(user_id)
        path: list[_Node] = []
        pos = 0
        bs = self.block_size
        while node is not None and pos < len(tokens):
            want = tokens[pos : pos + bs]
            child = node.children.get(want) if len(want) == bs else None
            if child is not None:
                path.append(child)
                pos += bs
                node = child
                continue
            best, best_n = None, 0
            for c in node.children.values():
                n = common_prefix(c.tokens, want)
                if n > best_n:
                    best, best_n = c, n
            if best is not None:
                path.append(best)
                pos += best_n
            break
        return path, pos

    def peek(self, user_id: str, tokens: tuple[int, ...]) -> int:
        """How many leading `tokens` this user's tree holds, changing nothing (no LRU touch, no
        pin expiry). Safe to call beside the thread that inserts: it walks copies of the child
        lists, so at worst it reads a tree a moment old."""
        node, pos, bs = self._roots.get(user_id), 0, self.block_size
        while node is not None and pos < len(tokens):
            want = tokens[pos : pos + bs]
            child = node.children.get(want) if len(want) == bs else None
            if child is not None:
                pos, node = pos + bs, child
                continue
            return pos + max((common_prefix(c.tokens, want) for c in list(node.children.values())), default=0)
        return pos

    def match(self, user_id: str, tokens: tuple[int, ...]) -> MatchResult:
        """Longest cached prefix of `tokens` in this user's tree (and marks it recently used)."""
        self._expire_pins()
        path, num = self._walk(user_id, tuple(tokens))
        self._touch(path)
        blocks = []
        pos = 0
        for node in path:
            used = min(len(node.tokens), num - pos)
            blocks.append((node.block_id, used))
            pos += used
        return MatchResult(num_tokens=num, blocks=tuple(blocks))

    # -- insertion -------------------------------------------------------------------------
    def insert(self, user_id: str, tokens: tuple[int, ...]) -> list[BlockWrite]:
        """Cache `tokens` for `user_id`. Returns the writes the engine must make into storage
        for tokens the tree did not hold. Stops early (caching less) when nothing is evictable."""
        self._expire_pins()
        tokens = tuple(tokens)
        root = self._roots.get(user_id)
        if root is None:
            root = self._roots[user_id] = _Node((), None, None, user_id)
        bs = self.block_size
        writes: list[BlockWrite] = []
        node, pos = root, 0
        held: list[_Node] = []  # the path being extended must not be evicted under us
        try:
            while pos < len(tokens):
                want = tokens[pos : pos + bs]
                child = node.children.get(want)
                if child is None:
                    child = self._extend_or_add(node, want, pos, writes)
                    if child is None:
                        break
                child.lock_ref += 1
                held.append(child)
                node = child
                pos += len(want)
        finally:
            for n in held:
                n.lock_ref -= 1
        self._touch(held)
        return writes

    def _extend_or_add(self, parent: _Node, want: tuple[int, ...], pos: int, writes: list[BlockWrite]) -> _Node | None:
        for key, c in list(parent.children.items()):
            if len(c.tokens) >= len(want) and c.tokens[: len(want)] == want:
                return c  # a longer block already covers these tokens
            if c.is_leaf and len(c.tokens) < len(want) and want[: len(c.tokens)] == c.tokens:
                n_old = len(c.tokens)
                del parent.children[key]
                c.tokens = want
                parent.children[want] = c
                writes.append(BlockWrite(c.block_id, pos + n_old, n_old, len(want) - n_old))
                return c
        block_id = self._allocate()
        if block_id is None:
            return None
        c = _Node(want, block_id, parent, parent.user_id)
        parent.children[want] = c
        writes.append(BlockWrite(block_id, pos, 0, len(want)))
        return c

    def _allocate(self) -> int | None:
        if not self._free and not self.evict(1):
            return None
        return self._free.pop()

    # -- eviction --------------------------------------------------------------------------
    def evict(self, num_blocks: int) -> int:
        """Free up to num_blocks, least recently used unpinned leaves first. Returns how many."""
        freed = 0
        while freed < num_blocks:
            if self.eviction == "random":
                leaves = [n for n in self._lru if n.is_leaf and n.lock_ref == 0]
                victim = self._rng.choice(leaves) if leaves else None
            else:
                victim = next((n for n in self._lru if n.is_leaf and n.lock_ref == 0), None)
            if victim is None:
                break
            self._remove(victim)
            freed += 1
        return freed

    def eviction_order(self) -> list[int]:
        """Block ids in the order `evict` would free them now, for tests and metrics."""
        return [n.block_id for n in self._lru if n.is_leaf and n.lock_ref == 0]

    def _remove(self, node: _Node) -> None:
        del node.parent.children[node.tokens]
        del self._lru[node]
        self._free.append(node.block_id)
        self.num_evicted += 1

    def _touch(self, path: list[_Node]) -> None:
        for n in path:  # root side first, so a parent is never more recent than its child
            self._lru[n] = None
            self._lru.move_to_end(n)

    # -- pins ------------------------------------------------------------------------------
    def pin(self, user_id: str, tokens: tuple[int, ...], ttl_s: float) -> PinReceipt | None:
        """Pin the cached blocks covering `tokens` (as far as they are cached) for ttl_s."""
        self._expire_pins()
        path, _ = self._walk(user_id, tuple(tokens))
        path = path[: self.pin_cap_blocks]
        if not path:
            return None
        new = [n for n in path if n.pin_ref == 0]
        while self._pins and self.num_pinned + len(new) > self.pin_cap_blocks:
            self._release(next(iter(self._pins)))
            new = [n for n in path if n.pin_ref == 0]
        for n in path:
            n.lock_ref += 1
            n.pin_ref += 1
            if n.pin_ref == 1:
                self._num_pinned += 1
        self._touch(path)
        receipt = PinReceipt(pin_id=next(self._pin_ids), user_id=user_id, num_blocks=len(path), expires_at=self._clock() + ttl_s)
        self._pins[receipt.pin_id] = (receipt, path)
        return receipt

    def unpin(self, receipt: PinReceipt) -> bool:
        """Release a pin. False when it had already ended (expired or displaced by the cap)."""
        held = self._pins.get(receipt.pin_id)
        if held is None or held[0] != receipt:
            return False
        self._release(receipt.pin_id)
        return True

    def _release(self, pin_id: int) -> None:
        _, path = self._pins.pop(pin_id)
        for n in path:
            n.lock_ref -= 1
            n.pin_ref -= 1
            if n.pin_ref == 0:
                self._num_pinned -= 1

    def _expire_pins(self) -> None:
        now = self._clock()
        for pin_id in [pid for pid, (r, _) in self._pins.items() if r.expires_at <= now]:
            self._release(pin_id)

    @property
    def num_pins(self) -> int:
        self._expire_pins()
        return len(self._pins)
