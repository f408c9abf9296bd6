"""Keystroke-aware pins follow the person's rhythm and survive other users' traffic."""

import pytest

from fimgate.backend.block_tree import BlockTree
from fimgate.backend.pinning import KeystrokePins


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def test_ttl_follows_the_persons_own_rhythm():
    pins = KeystrokePins("pin")
    key = ("u", "doc")
    pins.ttl_s(key, 0.0)
    for i in range(1, 20):
        ttl = pins.ttl_s(key, i * 0.2)  # a fast typist: 200 ms gaps
    assert ttl == pytest.approx(1.0)  # 4 x 0.2 s, raised to the 1 s floor
    slow = KeystrokePins("pin")
    slow.ttl_s(key, 0.0)
    for i in range(1, 20):
        ttl = slow.ttl_s(key, i * 1.5)
    assert ttl == pytest.approx(6.0)


def test_a_typing_session_keeps_its_anchor_and_a_long_pause_releases_it():
    clock = Clock()
    tree = BlockTree(num_blocks=12, block_size=4, pin_cap_share=0.5, clock=clock)
    pins = KeystrokePins("pin")
    anchor = tuple(range(16))
    for step in range(10):  # the person types every 300 ms; others flood the cache in between
        clock.t = step * 0.3
        tree.insert("typist", anchor + (1000 + step,))
        pins.repin(tree, "typist", "doc", anchor, clock.t)
        for u in range(4):
            tree.insert(f"other{step}-{u}", tuple(range(5000 + 100 * (step * 4 + u), 5000 + 100 * (step * 4 + u) + 16)))
        assert tree.match("typist", anchor).num_tokens == 16
    clock.t += 60  # a long pause: the pin lapses, and the blocks go with the next traffic
    for u in range(6):
        tree.insert(f"late{u}", tuple(range(90000 + 100 * u, 90000 + 100 * u + 16)))
    assert tree.match("typist", anchor).num_tokens < 16


def test_without_pins_lru_loses_the_anchor_under_the_same_traffic():
    tree = BlockTree(num_blocks=12, block_size=4)
    anchor = tuple(range(16))
    tree.insert("typist", anchor)
    for u in range(4):
        tree.insert(f"other{u}", tuple(range(5000 + 100 * u, 5000 + 100 * u + 16)))
    assert tree.match("typist", anchor).num_tokens < 16


def test_random_eviction_is_seeded_and_respects_pins():
    tree = BlockTree(num_blocks=6, block_size=2, pin_cap_share=0.5, eviction="random", seed=1)
    tree.insert("a", (1, 2, 3, 4))
    tree.pin("a", (1, 2, 3, 4), ttl_s=100)
    for u in range(10):
        tree.insert(f"b{u}", (10 * u + 100, 10 * u + 101, 10 * u + 102, 10 * u + 103))
        assert tree.num_used <= 6
    assert tree.match("a", (1, 2, 3, 4)).num_tokens == 4


def test_unknown_policy_is_rejected():
    with pytest.raises(ValueError, match="unknown pin policy"):
        KeystrokePins("sticky")


def test_the_sessions_remembered_are_bounded(monkeypatch):
    """One entry per user and document had no cap: a client naming new documents grew it forever."""
    from fimgate.backend import pinning

    monkeypatch.setattr(pinning, "MAX_SESSIONS", 100)
    pins = pinning.KeystrokePins("pin")
    for i in range(1000):
        pins.ttl_s(("u", f"doc{i}"), float(i))
    pins.ttl_s(("u", "doc900"), 2000.0)  # a recent one is kept, and its rhythm with it
    assert len(pins._sessions) == 100 and ("u", "doc999") in pins._sessions and ("u", "doc0") not in pins._sessions
