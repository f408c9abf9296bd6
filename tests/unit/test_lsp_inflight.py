"""Keys typed along the suggestion in flight are answered from it (fimgate/lsp/inflight.py)."""

import asyncio

from fimgate.lsp.inflight import Flight, answer, typed_along


def test_only_typing_at_the_flights_cursor_follows_it():
    f = Flight("def f(x):\n    return ", "\n")
    assert typed_along(f, "def f(x):\n    return ", "\n") == ""
    assert typed_along(f, "def f(x):\n    return x +", "\n") == "x +"
    assert typed_along(f, "def f(x):\n    return x", "  # note\n") is None  # the text after the cursor changed
    assert typed_along(f, "def g(x):\n    return x", "\n") is None  # an edit above
    assert typed_along(None, "x", "") is None


def test_an_answer_comes_as_soon_as_text_past_what_was_typed_is_decided():
    async def run():
        f = Flight("a = ", "\n")
        waiting = asyncio.ensure_future(answer(f, "fo", 5))
        f.add("f", "id-1")
        await asyncio.sleep(0.01)
        assert not waiting.done()  # "f" is not past what was typed
        f.add("oo(", "id-1")
        assert await waiting == ("o(", "id-1")
        assert await answer(f, "", 5) == ("foo(", "id-1")  # the same place: what is there, at once
        assert await answer(f, "bar", 5) is None  # it says something else: ask anew, now

    asyncio.run(run())


def test_a_suggestion_that_ends_without_more_sends_the_caller_to_ask_anew():
    async def run():
        f = Flight("a = ", "\n")
        f.add("foo", "")
        waiting = asyncio.ensure_future(answer(f, "foo", 5))
        await asyncio.sleep(0.01)
        done = asyncio.get_running_loop().create_future()
        done.set_result(("foo", "id-2"))
        f.finish(done)
        assert await waiting is None and f.done and f.completion_id == "id-2"
        assert await answer(Flight("a", ""), "", 0.01) is None  # nothing decided in time

    asyncio.run(run())
