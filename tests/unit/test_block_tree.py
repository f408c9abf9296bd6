"""The per-user block tree: exact LRU over unpinned leaves, pins, budget, isolation."""

from fimgate.backend.block_tree import BlockTree


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def seq(start, n):
    return tuple(range(start, start + n))


def test_match_is_token_granular_and_per_user():
    tree = BlockTree(num_blocks=8, block_size=4)
    tree.insert("alice", seq(0, 10))  # blocks of 4, 4, 2
    assert tree.match("alice", seq(0, 10)).num_tokens == 10
    assert tree.match("alice", seq(0, 6) + (99, 98)).num_tokens == 6  # diverges inside block 2
    assert tree.match("bob", seq(0, 10)).num_tokens == 0  # another user never matches
    assert tree.num_user_blocks("alice") == 3 and tree.num_user_blocks("bob") == 0


def test_peek_counts_what_match_would_and_leaves_the_lru_order_alone():
    tree = BlockTree(num_blocks=3, block_size=4)
    tree.insert("alice", seq(0, 4))
    tree.insert("alice", seq(100, 4))
    for probe in (seq(0, 10), seq(0, 2) + (7,), seq(100, 4), (5,)):
        assert tree.peek("alice", probe) == tree.match("alice", probe).num_tokens
    assert tree.peek("bob", seq(0, 4)) == 0  # another user's tree is never counted
    tree.match("alice", seq(100, 4))
    tree.peek("alice", seq(0, 4))  # a peek is not a use: the leaf used longest ago is still evicted first
    tree.insert("alice", seq(200, 8))  # needs two blocks: evicts the least recently used
    assert tree.match("alice", seq(0, 4)).num_tokens == 0 and tree.match("alice", seq(100, 4)).num_tokens == 4


def test_partial_leaf_grows_in_place():
    tree = BlockTree(num_blocks=4, block_size=4)
    tree.insert("u", seq(0, 6))
    writes = tree.insert("u", seq(0, 7))
    assert [(w.start, w.offset, w.num_tokens) for w in writes] == [(6, 2, 1)]
    assert tree.num_used == 2


def test_eviction_is_exact_lru_over_unpinned_leaves():
    tree = BlockTree(num_blocks=6, block_size=2)
    tree.insert("a", (1, 2, 3, 4))  # blocks a0 -> a1
    tree.insert("b", (5, 6))  # b0
    tree.insert("c", (7, 8, 9, 10))  # c0 -> c1
    tree.match("a", (1, 2, 3, 4))  # a is now the most recent
    # leaves only, oldest first: b0, then c1 (c0 becomes a leaf only after c1 goes)
    a0, a1 = tree.match("a", (1, 2, 3, 4)).blocks
    b0 = tree.match("b", (5, 6)).blocks[0]
    tree.match("a", (1, 2, 3, 4))
    c_blocks = [b for b, _ in tree.match("c", (7, 8, 9, 10)).blocks]
    tree.match("a", (1, 2, 3, 4))
    assert tree.eviction_order() == [b0[0], c_blocks[1], a1[0]]
    assert tree.evict(2) == 2
    assert tree.match("b", (5, 6)).num_tokens == 0
    assert tree.match("c", (7, 8, 9, 10)).num_tokens == 2  # c0 survives, c1 went
    assert tree.match("a", (1, 2, 3, 4)).num_tokens == 4


def test_budget_is_never_exceeded_and_pins_survive_pressure():
    clock = Clock()
    tree = BlockTree(num_blocks=10, block_size=4, pin_cap_share=0.5, clock=clock)
    tree.insert("typist", seq(0, 16))  # 4 blocks
    receipt = tree.pin("typist", seq(0, 16), ttl_s=5)
    assert receipt.num_blocks == 4 and tree.num_pinned == 4
    for u in range(20):  # other users' traffic, far more than the budget
        tree.insert(f"other{u}", seq(1000 * (u + 1), 16))
        assert tree.num_used <= 10
    assert tree.match("typist", seq(0, 16)).num_tokens == 16
    clock.t = 6  # the pin's time is up: the blocks become evictable again
    for u in range(20, 25):
        tree.insert(f"other{u}", seq(1000 * (u + 1), 16))
    assert tree.match("typist", seq(0, 16)).num_tokens < 16


def test_unpin_needs_the_receipt_and_the_cap_releases_oldest_pin():
    tree = BlockTree(num_blocks=8, block_size=2, pin_cap_share=0.5)  # cap: 4 blocks
    tree.insert("a", seq(0, 6))
    tree.insert("b", seq(100, 6))
    ra = tree.pin("a", seq(0, 6), ttl_s=60)
    rb = tree.pin("b", seq(100, 6), ttl_s=60)  # 3 + 3 > 4: a's pin is released
    assert tree.num_pinned == 3
    assert tree.unpin(ra) is False  # already gone
    assert tree.unpin(rb) is True
    assert tree.num_pinned == 0


def test_insert_stops_when_everything_is_pinned():
    tree = BlockTree(num_blocks=2, block_size=2, pin_cap_share=1.0)
    tree.insert("a", seq(0, 4))
    tree.pin("a", seq(0, 4), ttl_s=60)
    assert tree.insert("b", seq(50, 4)) == []
    assert tree.num_used == 2 and tree.match("a", seq(0, 4)).num_tokens == 4
