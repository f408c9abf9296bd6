"""Prefix-aware routing of requests across several vLLM servers.

The gateway keeps, per server, a token-block tree of what it sent there (one `BlockTree` per
server, keyed by cache namespace, sized like the server's KV pool so its LRU ages blocks out
roughly as the server does). A request goes to the server holding the longest cached prefix
of its prompt, unless the servers' queues are out of balance, in which case it goes to the
least loaded one (SGLang's cache-aware policy: both thresholds must be passed, absolute and
relative). A person typing therefore stays on the server that holds their blocks (and, when no
server holds any, on their previous one), and a new person lands on the shortest queue, then
the server whose cache holds the fewest blocks.

A server that fails to answer is taken out for `down_s` seconds and its tree dropped (its
cache is unknown when it returns); its users re-route to the others on their next request.
Each finished request reports vLLM's own cached_tokens, so the tree's predictions are checked
(`stats()`), not assumed.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from fimgate.backend.base import BackendUnavailableError
from fimgate.backend.block_tree import BlockTree

MAX_NAMESPACES = 100_000  # remembered homes, for counting moves


@dataclass
class _Server:
    url: str
    tree: BlockTree
    inflight: int = 0
    down_until: float = 0.0
    requests: int = 0
    predicted_tokens: int = 0
    cached_tokens: int = 0


class PrefixRouter:
    def __init__(
        self,
        urls: list[str],
        block_size: int = 32,
        capacity_tokens: int = 65536,
        balance_abs: int = 4,
        balance_rel: float = 1.5,
        down_s: float = 10.0,
        clock=time.monotonic,
    ) -> None:
        if not urls:
            raise ValueError("at least one vLLM server URL is needed")
        self.block_size = block_size
        self.capacity_blocks = max(1, capacity_tokens // block_size)
        self.balance_abs, self.balance_rel, self.down_s = balance_abs, balance_rel, down_s
        self._clock = clock
        self._lock = threading.Lock()
        self.servers = [_Server(u.rstrip("/"), self._new_tree()) for u in urls]
        self._home: OrderedDict[str, int] = OrderedDict()  # namespace -> server of its last request
        self.moves = 0  # requests sent to another server than their namespace's previous one

    def _new_tree(self) -> BlockTree:
        return BlockTree(self.capacity_blocks, self.block_size)

    def _cached_prefix(self, s: _Server, namespace: str, ids: tuple[int, ...]) -> int:
        # vLLM caches whole blocks only
        return s.tree.match(namespace, ids).num_tokens // self.block_size * self.block_size

    def pick(self, namespace: str, ids: tuple[int, ...], exclude: set[int] = frozenset()) -> tuple[int, int]:
        """(server index, predicted cached tokens) for a request; the request counts as in flight."""
        with self._lock:
            now = self._clock()
            up = [i for i, s in enumerate(self.servers) if s.down_until <= now and i not in exclude]
            if not up:
                raise BackendUnavailableError(f"no vLLM server is answering ({', '.join(s.url for s in self.servers)})")
            loads = {i: self.servers[i].inflight for i in up}
            lo, hi = min(loads.values()), max(loads.values())
            hits = {i: self._cached_prefix(self.servers[i], namespace, ids) for i in up}
            if hi - lo > self.balance_abs and hi > self.balance_rel * lo:
                best = min(up, key=lambda i: (loads[i], -hits[i]))
            else:
                # ties (no hit anywhere): the shortest queue, then the person's previous server, then
                # the emptiest cache (new people spread out)
                home = self._home.get(namespace)
                best = min(up, key=lambda i: (-hits[i], loads[i], i != home, self.servers[i].tree.num_used, i))
            s = self.servers[best]
            s.inflight += 1
            s.requests += 1
            s.tree.insert(namespace, ids)  # vLLM will hold these blocks once it has computed them
            if self._home.get(namespace, best) != best:
                self.moves += 1
            self._home[namespace] = best
            self._home.move_to_end(namespace)
            if len(self._home) > MAX_NAMESPACES:
                self._home.popitem(last=False)
            return best, hits[best]

    def finished(self, index: int, cached_tokens: int | None, predicted: int = 0) -> None:
        """A request ended; cached_tokens: what vLLM reported (None: it reported nothing - the
        request was cancelled or failed), predicted: what pick() said. Both are counted only
        together, so that the two sums compare like for like."""
        with self._lock:
            s = self.servers[index]
            s.inflight -= 1
            if cached_tokens is not None:
                s.cached_tokens += cached_tokens
                s.predicted_tokens += predicted

    def mark_down(self, index: int) -> None:
        with self._lock:
            s = self.servers[index]
            s.down_until = self._clock() + self.down_s
            s.tree = self._new_tree()

    def stats(self) -> list[dict]:
        with self._lock:
            now = self._clock()
            return [
                {
                    "url": s.url,
                    "up": s.down_until <= now,
                    "inflight": s.inflight,
                    "requests": s.requests,
                    "predicted_cached_tokens": s.predicted_tokens,
                    "reported_cached_tokens": s.cached_tokens,
                }
                for s in self.servers
            ]
