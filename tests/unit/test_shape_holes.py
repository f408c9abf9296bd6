"""The holes `fimgate bench shape` cuts from real files: what the person had typed, where the
cursor is, and what was taken out."""

from fimgate.bench.quality.shape import holes_in

SOURCE = "def mean(xs):\n    total = sum(xs)\n    count = len(xs)\n    # the mean\n    return total / count\n\nprint(mean([1]))\n"


def test_a_next_line_hole_removes_the_line_after_a_finished_line_of_code():
    (hole,) = holes_in("m.py", SOURCE, "next-line")  # not after the opener, nor around the comment or blank line
    assert hole.text[: hole.cursor].endswith("def mean(xs):\n    total = sum(xs)")
    assert hole.expected == "count = len(xs)"
    assert hole.text[hole.cursor :] == "\n    # the mean\n    return total / count\n\nprint(mean([1]))\n"


def test_a_block_opening_line_gets_its_body_removed():
    (hole,) = holes_in("m.py", SOURCE, "end-of-line")
    assert hole.text[: hole.cursor].endswith("def mean(xs):")
    assert hole.text[hole.cursor :] == "\nprint(mean([1]))\n"  # the body and the blank line after it
