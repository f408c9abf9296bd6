"""Which shifted tokens are reused and which are recomputed."""

from fimgate.backend.base import ReuseHint
from fimgate.backend.embedded.shifted_reuse import select_recompute, usable_spans

ShiftedSpan = ReuseHint


def test_spans_skip_the_exact_prefix_the_last_token_and_mismatches():
    old = tuple(range(100))
    new = old[:10] + (900, 901) + old[10:]  # two tokens inserted at 10: old[10:] moves by +2
    spans = usable_spans((ReuseHint(10, 12, 90),), old, new, cached=10, available_old=100)
    assert spans == [ShiftedSpan(10, 12, 89)]  # up to, not including, the prompt's last token
    assert usable_spans((ReuseHint(10, 12, 90),), old, new, cached=10, available_old=50) == [ShiftedSpan(10, 12, 40)]
    bogus = (ReuseHint(0, 12, 20),)  # claims old[0:20] sits at 12: it does not
    assert usable_spans(bogus, old, new, cached=10, available_old=100) == []


def test_budget_goes_to_the_window_after_the_change_then_nearest_the_hole():
    spans = [ShiftedSpan(10, 12, 100)]
    chosen = select_recompute(spans, 0.1)  # 10 tokens
    assert len(chosen) == 10
    assert set(range(12, 17)) <= chosen  # the 5 right after the change
    assert set(range(107, 112)) <= chosen  # the 5 nearest the hole
    assert select_recompute(spans, 0.0) == set()
    assert select_recompute(spans, 1.0) == set(range(12, 112))


def test_a_later_source_gives_only_what_earlier_sources_did_not():
    from fimgate.backend.embedded.shifted_reuse import uncovered

    placed = [ReuseHint(0, 10, 5), ReuseHint(40, 30, 5)]  # new positions 10-14 and 30-34 are taken
    got = uncovered([ReuseHint(100, 8, 30)], placed)  # new 8-37, old 100-129
    assert got == [ReuseHint(100, 8, 2), ReuseHint(107, 15, 15), ReuseHint(127, 35, 3)]
    assert uncovered([ReuseHint(0, 10, 5)], placed) == []
    assert uncovered([ReuseHint(0, 50, 5)], placed) == [ReuseHint(0, 50, 5)]


def test_a_long_moved_prompt_recomputes_at_most_the_cap():
    # 1,000 moved tokens after an edit at 12: 15% would be 150; the cap keeps 64, still a window
    # right after the change first, then the tokens nearest the hole
    spans = [ReuseHint(0, 12, 1000)]
    chosen = select_recompute(spans, 0.15, cap=64)
    assert len(chosen) == 64
    assert set(range(12, 12 + 32)) <= chosen
    assert set(range(1012 - 32, 1012)) <= chosen
    assert len(select_recompute(spans, 0.15)) == 150  # no cap
    assert len(select_recompute([ReuseHint(0, 12, 100)], 0.15, cap=64)) == 15  # a short prompt: the share
