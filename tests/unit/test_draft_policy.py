"""How many draft tokens a step tries (fimgate/backend/embedded/draft_policy.py): as many as paid
for their rows on this machine lately."""

from fimgate.backend.embedded.draft_policy import EXPLORE_EVERY, DraftPolicy


def _measured(step_ms: float, row_ms: float, kept: int, refused: int, threads: int = 1) -> DraftPolicy:
    p = DraftPolicy()
    for _ in range(20):
        p.record_step(threads, 1, step_ms / 1000)
        p.record_step(threads, 5, (step_ms + 4 * row_ms) / 1000)
        p.record_request(kept, refused)
    return p


def test_where_a_row_costs_half_a_step_and_drafts_are_seldom_kept_steps_draft_nothing():
    # an AVX2 CPU, a person typing new code: 57.7 ms a step, +26 ms a row, 1 draft token in 10 kept
    p = _measured(57.7, 26.0, kept=1, refused=9)
    assert round(p.cost(1), 2) == 0.45 and p.accept < 0.15
    lengths = [p.length(4, 1) for _ in range(3 * EXPLORE_EVERY)]
    assert lengths.count(0) == len(lengths) - 3 and set(lengths) == {0, 1}  # one request in 8 still tries one


def test_where_rows_are_nearly_free_and_drafts_are_kept_steps_draft_more():
    # weights read once for all rows (AVX-512, a GPU): +2 ms a row on a 14 ms step; 6 in 10 kept
    p = _measured(14.0, 2.0, kept=6, refused=4)
    assert p.length(4, 1) == 3  # 0.6^3 = 0.22 >= 0.14 > 0.6^4
    assert p.length(2, 1) == 2  # never more than --speculate


def test_the_figures_follow_the_text_and_the_thread_count():
    p = _measured(57.7, 26.0, kept=1, refused=9)
    for _ in range(60):  # the person now types what the last suggestion said: drafts kept
        p.record_request(4, 0)
    assert p.length(4, 1) == 4
    assert p.cost(2) == 0.5  # nothing timed at 2 threads yet: the prior
