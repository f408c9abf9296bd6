"""FIM prompt templates per model family, laid out so typing only ever appends.

A template renders a session's anchor as fixed segments plus an *open text*, the text that the
person's increment `inc` extends:

    psm (EFIM):  <PRE> P <SUF> S <MID> | inc            open text: ""   (inc follows <MID>)
    spm:         <SUF> S <PRE> P       | inc            open text: P    (inc extends the prefix)
    neighbour:   <file_sep>path (after the cursor)\\n S <file_sep>path\\n P | inc   (no FIM tokens)
    prefix:      <file_sep>path\\n P | inc      (the suffix is not shown: the baseline for neighbour)

Either way the prompt of the next keystroke starts with the prompt of this one: an exact
prefix hit. Sentinels are emitted as token ids, never spelled in text, so a file that contains
"<fim_prefix>" cannot forge a boundary. `neighbour` is for models trained without FIM tokens
(the bundled SmolLM2): the text after the cursor is shown as a neighbouring file, a form such
models saw in pre-training; `bench quality` measures it against prefix-only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Segment:
    text: str
    special: bool = False  # a sentinel: one token id, looked up by its text


@dataclass(frozen=True)
class ContextChunk:
    """Another file (or part of one) shown before the FIM part."""

    path: str
    text: str


@dataclass(frozen=True)
class FimTemplate:
    name: str
    layout: str  # "psm", "spm" or "neighbour"
    prefix: str | None
    suffix: str | None
    middle: str | None
    stop_tokens: tuple[str, ...]
    file_sep: str | None = None
    repo_name: str | None = None
    # CodeLlama puts a space after <PRE> and before <MID> (its SentencePiece training did).
    spaced: bool = False

    def sentinels(self) -> tuple[str, ...]:
        return tuple(s for s in (self.prefix, self.suffix, self.middle, self.file_sep, self.repo_name) if s)

    def render(
        self, prefix: str, suffix: str, path: str = "", context: tuple[ContextChunk, ...] = (), repo: str = ""
    ) -> tuple[list[Segment], str]:
        """Segments of the anchor, and the open text that inc extends."""
        segs: list[Segment] = self._context(context, repo)
        if self.layout == "neighbour":
            sep = Segment(self.file_sep, True) if self.file_sep else Segment("\n\n")
            segs += [sep, Segment(f"{path or 'file'} (after the cursor)\n{suffix}"), sep]
            return segs, f"{path or 'file'}\n{prefix}"
        if self.layout == "prefix":  # the text after the cursor is not shown (a baseline)
            return segs + ([Segment(self.file_sep, True)] if self.file_sep else []), f"{path or 'file'}\n{prefix}"
        if self.file_sep and context:
            segs += [Segment(self.file_sep, True), Segment(f"{path}\n")]
        pre, suf, mid = Segment(self.prefix, True), Segment(self.suffix, True), Segment(self.middle, True)
        sp = " " if self.spaced else ""
        if self.layout == "psm":
            segs += [pre, Segment(sp + prefix), suf, Segment(suffix), *([Segment(sp)] if sp else []), mid]
            return segs, ""
        if self.layout == "spm":
            if self.name == "codestral":  # [SUFFIX] S [PREFIX] P
                segs += [suf, Segment(suffix), pre]
            else:  # <PRE> <SUF> S <MID> P (CodeLlama / StarCoder SPM)
                segs += [pre, *([Segment(sp)] if sp else []), suf, Segment(suffix), *([Segment(sp)] if sp else []), mid]
            return segs, (sp if self.spaced else "") + prefix
        raise ValueError(f"unknown layout {self.layout!r}")

    def _context(self, context: tuple[ContextChunk, ...], repo: str) -> list[Segment]:
        if not context:
            return []
        segs: list[Segment] = []
        if self.repo_name:
            segs += [Segment(self.repo_name, True), Segment(f"{repo or 'repo'}\n")]
        for c in context:
            if self.file_sep:
                segs += [Segment(self.file_sep, True), Segment(f"{c.path}\n{c.text}\n")]
            else:  # families without a file separator: a path comment, as DeepSeek-Coder's repo data
                segs += [Segment(f"# {c.path}\n{c.text}\n")]
        return segs


TEMPLATES: dict[str, FimTemplate] = {
    t.name: t
    for t in (
        FimTemplate(
            "qwen2.5-coder",
            "psm",
            "<|fim_prefix|>",
            "<|fim_suffix|>",
            "<|fim_middle|>",
            ("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|im_end|>"),
            "<|file_sep|>",
            "<|repo_name|>",
        ),
        FimTemplate(
            "starcoder2",
            "psm",
            "<fim_prefix>",
            "<fim_suffix>",
            "<fim_middle>",
            ("<|endoftext|>", "<file_sep>", "<fim_pad>"),
            "<file_sep>",
            "<repo_name>",
        ),
        FimTemplate("starcoder", "psm", "<fim_prefix>", "<fim_suffix>", "<fim_middle>", ("<|endoftext|>", "<file_sep>")),
        FimTemplate("santacoder", "psm", "<fim-prefix>", "<fim-suffix>", "<fim-middle>", ("<|endoftext|>",)),
        FimTemplate(
            "deepseek-coder", "psm", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", ("<｜end▁of▁sentence｜>", "<|EOT|>")
        ),
        FimTemplate("codellama", "psm", "<PRE>", "<SUF>", "<MID>", ("<EOT>", "</s>"), spaced=True),
        FimTemplate("codellama-spm", "spm", "<PRE>", "<SUF>", "<MID>", ("<EOT>", "</s>"), spaced=True),
        FimTemplate(
            "codegemma",
            "psm",
            "<|fim_prefix|>",
            "<|fim_suffix|>",
            "<|fim_middle|>",
            ("<|file_separator|>", "<eos>"),
            "<|file_separator|>",
        ),
        FimTemplate("codestral", "spm", "[PREFIX]", "[SUFFIX]", None, ("</s>",)),
        FimTemplate(
            "smollm2", "neighbour", None, None, None, ("<|endoftext|>", "<file_sep>", "<|im_end|>"), "<file_sep>", "<repo_name>"
        ),
        FimTemplate(
            "smollm2-prefix",
            "prefix",
            None,
            None,
            None,
            ("<|endoftext|>", "<file_sep>", "<|im_end|>"),
            "<file_sep>",
            "<repo_name>",
        ),
    )
}


def template_for_model(model_name: str) -> FimTemplate:
    """Pick the family template from a model's name (file or folder)."""
    n = model_name.lower()
    for key, name in (
        ("qwen", "qwen2.5-coder"),
        ("starcoder2", "starcoder2"),
        ("starcoder", "starcoder"),
        ("santacoder", "santacoder"),
        ("deepseek", "deepseek-coder"),
        ("codellama", "codellama"),
        ("codegemma", "codegemma"),
        ("codestral", "codestral"),
        ("smollm", "smollm2"),
    ):
        if key in n:
            return TEMPLATES[name]
    return TEMPLATES["smollm2"]
