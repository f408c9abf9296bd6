"""A row's distance from the reference, hole by hole, with an interval that says how sure it is."""

import pytest

from fimgate.bench.common.paired import paired_difference


def test_the_same_row_is_zero_and_a_uniform_shift_is_certain():
    ref = [10.0, 40.0, 75.0, 100.0, 0.0]
    assert paired_difference(ref, ref) == {"mean": 0.0, "ci95": [0.0, 0.0]}
    assert paired_difference([x + 2 for x in ref], ref) == {"mean": 2.0, "ci95": [2.0, 2.0]}


def test_one_hole_of_74_going_from_no_match_to_exact_is_not_a_sure_gain():
    ref = [30.0] * 74
    row = [130.0] + [30.0] * 73
    d = paired_difference(row, ref)
    assert d["mean"] == 1.35
    assert d["ci95"][0] == 0.0 and d["ci95"][1] > 1.35  # the interval reaches zero: it may be luck
    assert d == paired_difference(row, ref)  # seeded: the same data, the same interval


def test_rows_of_different_lengths_are_refused():
    with pytest.raises(ValueError):
        paired_difference([1.0], [1.0, 2.0])
