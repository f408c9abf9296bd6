"""Context chunks are shown in the order each user's requests first carried them: a client's ring
moving a chunk changes no prompt; a new chunk comes last; one user's order is never another's."""

from fimgate.backend.base import ReuseClass
from fimgate.efim.chunk_order import ChunkOrder
from fimgate.efim.planner import EditorState, EfimPlanner, common_prefix_len
from fimgate.efim.templates import TEMPLATES, ContextChunk
from fimgate.efim.window import WindowConfig

A = ContextChunk("a.py", "def area(w, h):\n    return w * h\n")
B = ContextChunk("b.py", "class Box:\n    width: int\n    height: int\n")
C = ContextChunk("c.py", "UNITS = ('mm', 'cm', 'in')\n")
DOC = "from a import area\nfrom b import Box\n\n\ndef volume(box, depth):\n    return "


def test_a_moved_chunk_keeps_its_place_and_a_new_one_comes_last():
    order = ChunkOrder()
    assert order.arrange("u", (A, B)) == (A, B)
    assert order.arrange("u", (B, A)) == (A, B)  # the client moved a to the end of its ring
    assert order.arrange("u", (C, B, A)) == (A, B, C)
    assert order.arrange("u", (C, B)) == (B, C)  # the ring dropped a


def test_each_user_has_their_own_order():
    order = ChunkOrder()
    order.arrange("u", (A, B))
    assert order.arrange("v", (B, A)) == (B, A)
    assert order.arrange("u", (B, A)) == (A, B)


def test_the_memory_is_bounded_and_a_forgotten_chunk_is_new_again():
    order = ChunkOrder(max_chunks=2)
    order.arrange("u", (A, B))
    order.arrange("u", (C,))  # a is the least recently used: forgotten
    assert len(order) == 2
    assert order.arrange("u", (A, B)) == (B, A)


def _planner(tok):
    return EfimPlanner(tok, TEMPLATES["smollm2"], WindowConfig(prefix_tokens=256, suffix_tokens=64), recompute_share=0.15)


def test_typing_on_after_the_client_reordered_its_chunks_is_still_an_efim_append(smol_tok):
    p = _planner(smol_tok)
    first = p.plan(EditorState("u", "v.py", DOC, len(DOC), path="v.py", context=(A, B, C)))
    text = DOC + "b"
    moved = p.plan(EditorState("u", "v.py", text, len(text), path="v.py", context=(B, C, A)))
    assert moved.reuse_class is ReuseClass.EFIM_APPEND
    assert moved.prompt_ids[: len(first.prompt_ids) - 2] == first.prompt_ids[:-2]  # (the open tail re-tokenizes)


def test_a_reanchor_after_a_reorder_shows_the_same_chunks_and_a_new_chunk_only_appends(smol_tok):
    p = _planner(smol_tok)
    first = p.plan(EditorState("u", "v.py", DOC, len(DOC), path="v.py", context=(A, B)))
    cursor = DOC.index("\n\ndef")  # a cursor jump: a re-anchor
    jumped = p.plan(EditorState("u", "v.py", DOC, cursor, path="v.py", context=(B, A)))
    assert jumped.reuse_class is ReuseClass.REANCHOR
    sep = smol_tok.token_id("<file_sep>")
    after_chunks = [i for i, t in enumerate(first.prompt_ids) if t == sep][2]  # <file_sep> a, b, then the file
    assert common_prefix_len(jumped.prompt_ids, first.prompt_ids) > after_chunks  # a then b, as they first arrived
    added = p.plan(EditorState("u", "v.py", DOC, cursor, path="v.py", context=(B, A, C)))
    assert common_prefix_len(added.prompt_ids, jumped.prompt_ids) > after_chunks  # c goes after them
    shown = smol_tok.decode(list(added.prompt_ids))
    assert shown.index("class Box") < shown.index("UNITS") < shown.index("from a import area")
    other = p.plan(EditorState("w", "v.py", DOC, cursor, path="v.py", context=(B, A)))
    text = smol_tok.decode(list(other.prompt_ids))
    assert text.index("class Box") < text.index("def area")  # w's own order: as w sent them
