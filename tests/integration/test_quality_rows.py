"""bench quality's rows for the default-model quality table: what `serve` shows (the hole as an
editor holds it, through the CompletionService) beside the raw model, hole by hole with paired
intervals; and holes that start mid-line."""

from fimgate.bench.quality.infilling import run_quality
from fimgate.bench.workloads.humaneval import mid_line
from fimgate.efim.postprocess import MARKERS
from fimgate.efim.templates import TEMPLATES
from tests.conftest import humaneval_or_skip


def test_the_served_row_is_what_serve_shows_and_is_compared_hole_by_hole(engine):
    problems = humaneval_or_skip("single-line", 6)
    result = run_quality(
        engine, TEMPLATES["smollm2"], problems, ["no-cache", "served"], single_line=True, max_tokens=24, keep_completions=True
    )
    served = result["served"]
    for completion in served["completions"]:
        shown = completion[:-1]  # the empty line's newline follows what is shown
        assert completion.endswith("\n") and shown == shown.rstrip()
        assert not any(m in shown for m in MARKERS) and "```" not in shown
    for key in ("pass@1", "exact_match", "edit_similarity"):
        diff = served[f"{key}_minus_no-cache"]
        assert diff["ci95"][0] <= diff["mean"] <= diff["ci95"][1]
    assert result["served"]["prefilled_tokens_mean"] > 100  # a cold request: the whole prompt prefilled


def test_a_mid_line_hole_is_the_rest_of_a_half_typed_line():
    (p,) = humaneval_or_skip("single-line", 1)
    begun = mid_line(p)
    assert begun.prompt + begun.canonical == p.prompt + p.canonical  # the same program when filled right
    assert not begun.prompt.endswith("\n") and begun.prompt[len(p.prompt) :].strip()  # some of the line typed
    assert begun.canonical.strip() and begun.canonical.endswith("\n")


def test_the_type_through_row_types_half_of_the_suggestion_and_counts_its_answers(engine):
    problems = humaneval_or_skip("single-line", 6)
    result = run_quality(
        engine, TEMPLATES["smollm2"], problems, ["served", "type-through"], single_line=True, max_tokens=24, keep_completions=True
    )
    tally = result["type-through"]["type_through"]
    assert tally["typed"] >= 3  # most holes get a suggestion of 2+ characters to type into
    assert 0 < tally["type_through"] <= tally["typed"]  # answered with the rest, no model call
    assert tally["same_as_decoding_afresh"] <= tally["type_through"]
    diff = tally["pass@1_minus_decoding_afresh"]  # beside the model asked afresh where the person is
    assert diff["ci95"][0] <= diff["mean"] <= diff["ci95"][1]
    for made, through in zip(result["served"]["completions"], result["type-through"]["completions"]):
        typed = made[: (len(made) - 1) // 2]  # the person typed the first half of what was shown
        assert through.startswith(typed) and through.endswith("\n")


def test_real_files_cut_mid_line_are_scored_without_tests(engine, tmp_path):
    """--dataset real-mid-line: lines of real files half typed, in every language found; no tests
    exist for them, so pass@1 is not reported (None), exact match and edit similarity are."""
    from fimgate.bench.workloads.real_mid_line import load

    (tmp_path / "go").mkdir()
    (tmp_path / "go" / "sum.go").write_text(
        "package sum\n\n// Sum adds.\nfunc Sum(xs []int) int {\n\ttotal := 0\n"
        "\tfor _, x := range xs {\n\t\ttotal += x\n\t}\n\treturn total\n}\n"
    )
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "mean.py").write_text(
        "def mean(xs):\n    # the average\n    total = sum(xs)\n    return total / len(xs)\n"
    )
    problems = load([str(tmp_path / "go"), str(tmp_path / "py")], limit=4)
    assert sorted(p.path for p in problems) == ["mean.py", "mean.py", "sum.go", "sum.go"]
    for p in problems:
        typed = p.prompt[p.prompt.rfind("\n") + 1 :]
        assert (
            p.prompt + p.canonical + p.suffix == (tmp_path / p.path.split(".")[1] / p.path).read_text()
        )  # filled right: the file
        assert typed.strip() and p.canonical.strip() and p.canonical.endswith("\n")  # half typed, half missing
        assert not typed.strip().startswith(("#", "//"))  # a line of code, not a comment
    result = run_quality(engine, TEMPLATES["smollm2"], problems, ["no-cache", "efim"], single_line=True, max_tokens=12)
    assert result["efim"]["pass@1"] is None and "pass@1_minus_no-cache" not in result["efim"]
    assert result["efim"]["problems"] == 4 and 0 <= result["efim"]["edit_similarity"] <= 100
    assert result["efim"]["cached_tokens_mean"] > 0  # the typed lines were EFIM appends on the anchor
    per = result["efim"]["by_language"]
    assert sorted(per) == ["go", "python"] and per["go"]["problems"] == per["python"]["problems"] == 2
    pooled = (per["go"]["edit_similarity"] + per["python"]["edit_similarity"]) / 2  # two holes each
    assert abs(pooled - result["efim"]["edit_similarity"]) < 0.02
    assert (
        "edit_similarity_minus_first" in per["go"]
        and "edit_similarity_minus_first" not in result["no-cache"]["by_language"]["go"]
    )
