"""Shape a raw completion into what a person should see.

- Single- or multi-line, by context: at the end of a line that opens a block (`if x:`,
  `function f() {`), or at the start of an empty block (the line before ends with ":" or an
  opening bracket, or tree-sitter finds an empty block or an unclosed construct at the cursor:
  efim/syntax.py) a whole body is wanted; mid-line, only the rest of the line; on a blank line
  between statements, the next statements: up to the suggestion's first empty line and while
  its lines are as deep as its first.
- On a blank line with the file going on below, a suggestion stops before it writes the file's
  next line again, differently: a line that begins as that one does (its first word) at its depth,
  or, where that line is the body of a block the suggestion opens, a body line at its depth.
- At the end of a line of code (a person finished it: the next line is what is missing), a
  suggestion whose first line is empty is the newline and the next line - with its block, when
  that line opens one - as editors show it (llama.vscode, Copilot's single-line mode); dropped
  when it only repeats the file's next non-empty lines (indentation included).
- What is not code ends a suggestion: a chat or FIM marker written as text (`<|im_end|>`, ...)
  and a Markdown fence at a line's start (an Instruct model's "```" and prose after the code);
  fences stay in Markdown files.
- A multi-line completion stops where the enclosing block ends, by indentation (a block's body is
  deeper than the line that opened it), and before a line that is the file's next line
  (indentation included): the lines after it are the file's own.
- Text that the document already has right after the cursor is dropped, not repeated.
- Trailing whitespace is trimmed.
Pure text in, text out.
"""

from __future__ import annotations

import re

from fimgate.efim.syntax import wants_body

OPENERS = (":", "{", "(", "[")
_FIRST_WORD = re.compile(r"[ \t]*([^\w\s]*\w*)")  # `return`, `'five`, `}`
# chat turns and FIM sentinels of the templates fimgate serves, as text (a backend that does not
# stop on them as tokens, or a model that spells them): the suggestion ends before one
MARKERS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|file_sep|>",
    "<|repo_name|>",
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|fim_pad|>",
    "<fim_prefix>",
    "<fim_suffix>",
    "<fim_middle>",
    "<fim_pad>",
    "<file_sep>",
    "<repo_name>",
    "<EOT>",
)
FENCE = "```"
FENCED_LANGUAGES = ("markdown",)  # where a fence is text a person writes


def code_part(completion: str, fences: bool = True) -> str:
    """The completion up to the first thing that is not code: a marker, or (fences) a line that
    starts with a Markdown fence."""
    cut = len(completion)
    for m in MARKERS:
        i = completion.find(m, 0, cut)
        if i != -1:
            cut = i
    if fences:
        start = 0
        while start < cut:
            if completion.startswith(FENCE, start + _indent(completion[start:cut])):
                return completion[:start]
            nl = completion.find("\n", start, cut)
            if nl == -1:
                break
            start = nl + 1
    return completion[:cut]


def _unsure_end(raw: str, fences: bool) -> int:
    """How many characters at the end of raw may still become a marker or a fence: held back."""
    held = 0
    for m in MARKERS:
        for n in range(min(len(m) - 1, len(raw)), held, -1):
            if raw.endswith(m[:n]):
                held = n
                break
    if fences:
        last = raw[raw.rfind("\n") + 1 :]
        body = last.lstrip(" \t")
        if body and FENCE.startswith(body):
            held = max(held, len(last))
    return held


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _rest_of_line(text: str, cursor: int) -> str:
    end = text.find("\n", cursor)
    return text[cursor:] if end == -1 else text[cursor:end]


def opens_block(text: str, cursor: int) -> bool:
    """The cursor ends a line that opens a block (`if x:`, `function f() {`): its body comes next."""
    line_start = text.rfind("\n", 0, cursor) + 1
    return text[line_start:cursor].rstrip().endswith(OPENERS) and not _rest_of_line(text, cursor).strip()


def at_line_end(text: str, cursor: int) -> bool:
    """The cursor ends a line that has code: what may come next is the next line."""
    line_start = text.rfind("\n", 0, cursor) + 1
    return bool(text[line_start:cursor].strip()) and not _rest_of_line(text, cursor).strip()


def wants_multiline(text: str, cursor: int, language: str = "python") -> bool:
    line_start = text.rfind("\n", 0, cursor) + 1
    if text[line_start:cursor].strip():
        return opens_block(text, cursor)  # mid-line: finish this line, unless it opened a block
    if not _rest_of_line(text, cursor).strip():
        return True  # a blank line: the next statements (a paragraph, see between_statements)
    before = text[:line_start].rstrip()
    if before.endswith(OPENERS):
        return True
    return wants_body(text, cursor, language)  # an empty block or an unclosed construct (efim/syntax.py)


def between_statements(text: str, cursor: int, language: str = "python") -> bool:
    """The cursor is on a blank line that does not begin a block's body (neither the line above
    opens one nor the syntax finds an empty block there): a person pressed Enter after a statement.
    What is wanted is the next statements, as many as belong together - a multi-line suggestion
    there ends at its first empty line and where a line is shallower than its first line.
    (Showing one line there, HumanEval multi-line holes scored pass@1 15.0 against the raw
    model's 20.0.)"""
    line_start = text.rfind("\n", 0, cursor) + 1
    if not _blank_line(text, cursor):
        return False
    return not text[:line_start].rstrip().endswith(OPENERS) and not wants_body(text, cursor, language)


def _body_indent(text: str, cursor: int) -> int:
    """The least indentation a line of the suggestion may have and stay in the cursor's block: at
    the end of a block-opening line, or on a blank line right after one, deeper than that line."""
    line_start = text.rfind("\n", 0, cursor) + 1
    before = text[line_start:cursor]
    if before.strip():
        return _indent(before) + 1 if opens_block(text, cursor) else _indent(text[line_start:])
    above = text[:line_start].rstrip().rsplit("\n", 1)[-1]
    if above.strip() and above.rstrip().endswith(OPENERS):
        return max(_indent(before), _indent(above) + 1)
    return _indent(before)


def cut_at_block_end(completion: str, text: str, cursor: int, min_indent: int = 0, paragraph: bool = False) -> str:
    """Keep lines while they stay inside the block the cursor is in (and indented at least
    min_indent: llama.cpp's n_indent). Between statements (paragraph: see between_statements) also
    while they are as deep as the suggestion's first line of text, and up to its first empty line
    that another line follows (an empty line still being written may yet get text)."""
    base = max(_body_indent(text, cursor), min_indent)
    lines = completion.split("\n")
    nxt, head = _file_next_line(text, cursor)
    if paragraph:
        first = next((i for i, line in enumerate(lines) if line.strip()), None)
        if first is not None:
            base = max(base, _indent((head if first == 0 else "") + lines[first]))
    kept = [lines[0]]
    seen_text = bool(lines[0].strip())
    for i, line in enumerate(lines[1:], 1):
        if line.strip() and _indent(line) < base:
            break
        if paragraph and seen_text and not line.strip() and i < len(lines) - 1:
            break
        seen_text = seen_text or bool(line.strip())
        kept.append(line)
    if _blank_line(text, cursor):
        kept = _before_the_file_below(kept, head, nxt)
    return "\n".join(kept)


def _blank_line(text: str, cursor: int) -> bool:
    line_start = text.rfind("\n", 0, cursor) + 1
    return not text[line_start:cursor].strip() and not _rest_of_line(text, cursor).strip()


def _first_word(line: str) -> str:
    m = _FIRST_WORD.match(line)
    return m.group(1) if m else ""


def _before_the_file_below(lines: list[str], head: str, nxt: str | None) -> list[str]:
    """On a blank line, where the file goes on below: the suggestion's lines before the model writes
    again, differently, what the file has there - a line that begins as the file's next line does
    (its first word), at its depth; or, where the file's next line is deeper than the suggestion's
    first (it is the body of a block the suggestion opens), a body line at that depth right after
    a line that opens a block. Chosen on HumanEval, where showing up to an empty line scored pass@1
    -3.0 against the raw model's first line on single-line holes (docs/benchmarks.md)."""
    if nxt is None:
        return lines
    depth, word = _indent(nxt), _first_word(nxt)
    full = [head + lines[0], *lines[1:]]
    first = next((i for i, line in enumerate(full) if line.strip()), None)
    if first is None:
        return lines
    below_is_body = depth > _indent(full[first])
    after_opener = False
    for i, line in enumerate(full):
        if not line.strip():
            continue
        if i and _indent(line) == depth and _first_word(line) == word:
            return lines[:i]
        if below_is_body and after_opener and _indent(line) >= depth:
            return lines[:i]
        after_opener = line.rstrip().endswith(OPENERS)
    return lines


def _file_next_line(text: str, cursor: int) -> tuple[str | None, str]:
    """The file's next non-empty line after the cursor's (indentation kept), or None; and the
    cursor's line before the cursor."""
    end = text.find("\n", cursor)
    nxt = None
    while end != -1:
        start, end = end + 1, text.find("\n", end + 1)
        line = text[start:] if end == -1 else text[start:end]
        if line.strip():
            nxt = line.rstrip()
            break
    return nxt, text[text.rfind("\n", 0, cursor) + 1 : cursor]


def _repeat_at(lines: list[str], nxt: str | None, head: str) -> int | None:
    """The index of the first of `lines` (a multi-line suggestion, line 0 at the cursor, after
    `head`) that is the file's next non-empty line `nxt`, indentation included, or None."""
    if nxt is None:
        return None
    for i, line in enumerate(lines):
        full = line if i else (head + line if not head.strip() else None)
        if full is not None and full.strip() and full.rstrip() == nxt:
            return i
    return None


def before_repeat(out: str, text: str, cursor: int) -> str:
    """A multi-line completion up to its line that is the file's next line: the model wrote the
    missing lines and went on into the ones the file has (HumanEval single-line holes after a
    block opener: the body's other lines came twice). Where nothing follows the cursor on its line."""
    lines = out.split("\n")
    i = _repeat_at(lines, *_file_next_line(text, cursor))
    return out if i is None else "\n".join(lines[:i]).rstrip()


def next_line(completion: str, min_indent: int = 0) -> str:
    """Of a completion that starts with a newline: up to and with its first line of text, and the
    block that line opens (its lines deeper than it), or "" while it has none."""
    lines = completion.split("\n")
    k = next((i for i, line in enumerate(lines) if i and line.strip()), None)
    if k is None or _indent(lines[k]) < min_indent:
        return ""
    end = k + 1
    if lines[k].rstrip().endswith(OPENERS):
        base = _indent(lines[k]) + 1
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) >= base):
            end += 1
    return "\n".join(lines[:end])


def tidy(
    completion: str,
    text: str,
    cursor: int,
    multiline: bool | None = None,
    language: str = "python",
    min_indent: int = 0,
    fences: bool = True,
    paragraph: bool | None = None,
) -> str:
    """The completion as shown: multiline and paragraph (between_statements) None decide by context."""
    if multiline is None:
        multiline = wants_multiline(text, cursor, language)
    if multiline and paragraph is None:
        paragraph = between_statements(text, cursor, language)
    completion = code_part(completion, fences)
    if multiline and not _rest_and_next_line(text[cursor:])[0]:
        completion = before_repeat(completion, text, cursor)
    first = completion.split("\n", 1)[0]
    eol = not multiline and not first.strip() and at_line_end(text, cursor)
    if multiline:
        out = cut_at_block_end(completion, text, cursor, min_indent, bool(paragraph))
    else:
        out = next_line(completion, min_indent) if eol else first
    out = "\n".join(line.rstrip() for line in out.split("\n")).rstrip()
    if not out.strip():
        return ""
    suffix = text[cursor:]
    rest_of_line, next_text = _rest_and_next_line(suffix)
    if rest_of_line and out.endswith(rest_of_line):
        out = out[: len(out) - len(rest_of_line)].rstrip()  # the line already ends with it
    if multiline and next_text and "\n" in out and out.split("\n")[-1].strip() == next_text:
        out = out[: out.rfind("\n")].rstrip()  # the last line repeats the file's next line
    if eol and _repeats_next_lines(out, suffix):
        return ""
    if suffix.startswith(out):
        return ""  # the whole suggestion is already there
    return out


def _repeats_next_lines(out: str, suffix: str) -> bool:
    """The suggestion's lines of text are the file's next non-empty lines, indentation included: a
    closing `}` one level deeper than the `}` below it closes another block and is the missing line."""
    mine = [line.rstrip() for line in out.split("\n") if line.strip()]
    theirs = [line.rstrip() for line in suffix.split("\n")[1:] if line.strip()][: len(mine)]
    return mine == theirs


class StreamTidy:
    """tidy() for a completion that streams in: feed() returns only text that no continuation can
    take back, finish() the rest, so that what a client concatenates is tidy(whole), streamed or
    not. What is held back is only what tidy() could still remove, so that an editor shows the
    first words as soon as they are certain: a single line's trailing whitespace and its
    longest end that begins the rest of the cursor's line (`x, ` before `x, y)` may become the
    `x, y)` the line already has); of a multi-line completion, the same of its last line with
    text, all of that line while it could still turn out to be the file's next line, and the
    line before it when it may be that and the last line may vanish (see _certain); all of it
    while it is still the start of the text after the cursor (it may be there already); an end
    that may still become a marker or a fence; and, at the end of a line, the next line until it
    (and the block it opens) is complete, since it may only repeat the file's next lines."""

    def __init__(
        self, text: str, cursor: int, multiline: bool, min_indent: int = 0, fences: bool = True, paragraph: bool | None = None
    ) -> None:
        self.doc, self.cursor, self.multiline, self.min_indent, self.fences = text, cursor, multiline, min_indent, fences
        self.paragraph = multiline and (between_statements(text, cursor) if paragraph is None else paragraph)
        self.blank = _blank_line(text, cursor)
        self.suffix = text[cursor:]
        self.rest, self.next_line = _rest_and_next_line(self.suffix)  # what tidy() compares the end with
        self.eol = not multiline and at_line_end(text, cursor)
        self.file_next = _file_next_line(text, cursor)  # what a multi-line suggestion stops before
        self.raw = ""
        self.sent = ""
        self._final = False  # nothing the model writes next can change what is shown

    def feed(self, piece: str) -> str:
        self.raw += piece
        return self._send(self._certain())

    @property
    def done(self) -> bool:
        """Nothing more the model writes can be shown: a single line has its newline, a
        multi-line suggestion's block has ended, a marker or a fence came (found at the last feed)."""
        return self._final

    def finish(self, raw: str) -> str:
        """The rest of tidy(raw); `raw` is the whole completion as the backend reports it."""
        final = self._tidy(raw)
        if not final.startswith(self.sent):  # cannot happen if _certain is right; never send a wrong tail
            return ""
        out, self.sent = final[len(self.sent) :], final
        return out

    def _tidy(self, raw: str) -> str:
        return tidy(
            raw, self.doc, self.cursor, self.multiline, min_indent=self.min_indent, fences=self.fences, paragraph=self.paragraph
        )

    def _send(self, certain: str) -> str:
        if len(certain) <= len(self.sent) or not certain.startswith(self.sent) or self.suffix.startswith(certain):
            return ""
        out, self.sent = certain[len(self.sent) :], certain
        return out

    def _final_text(self) -> str:
        self._final = True
        return self._tidy(self.raw)

    def _certain(self) -> str:
        if len(code_part(self.raw, self.fences)) < len(self.raw):
            return self._final_text()  # a marker or a fence: nothing after it shows
        raw = self.raw[: len(self.raw) - _unsure_end(self.raw, self.fences)]
        if not self.multiline:
            first, newline, _ = raw.partition("\n")
            if self.eol and not first.strip():
                return self._final_text() if newline and _next_line_complete(raw, self.min_indent) else ""
            if newline:
                return self._final_text()  # the line is complete
            line = raw.rstrip()
            return line[: len(line) - _begins(line, self.rest)].rstrip()
        if not self.rest and _repeat_at(raw.split("\n")[:-1], *self.file_next) is not None:
            return self._final_text()  # a whole line is the file's next one: the rest is cut
        if self.blank and "\n" in raw:  # a line's first word may still grow into the next line's
            last = raw[raw.rfind("\n") + 1 :]
            if _FIRST_WORD.fullmatch(last):
                raw = raw[: len(raw) - len(last.lstrip(" \t"))]
        kept = cut_at_block_end(raw, self.doc, self.cursor, self.min_indent, self.paragraph)
        if len(kept) < len(raw.rstrip(" \t")) and "\n" in raw[len(kept) :]:
            return self._final_text()  # the block ended
        lines = kept.split("\n")
        with_text = [i for i, line in enumerate(lines) if line.strip()]
        if not with_text:
            return ""
        # Only the last line with text can still change: it may lose its end to the text after
        # the cursor (its longest end that begins it), or be dropped as a repeat of the file's
        # next line; and if it vanishes into that text, the line before it is the last one.
        last = lines[with_text[-1]].rstrip()
        head = last[: len(last) - _begins(last, self.rest)].rstrip()
        upto, tail = with_text[-1], []
        if head.strip():
            if not self.next_line.startswith(head.strip()):
                tail = [head]  # it can no longer be the file's next line
        elif len(with_text) >= 2:  # it may vanish: the line before is then the last one
            before = with_text[-2]
            upto = before if lines[before].strip() == self.next_line else before + 1
        out = "\n".join([line.rstrip() for line in lines[:upto]] + tail).rstrip()
        return out if out.strip() else ""


def _next_line_complete(raw: str, min_indent: int) -> bool:
    """raw starts with a newline: its first line of text has ended, and so has the block that line
    opens - next_line(raw) can no longer change."""
    lines = raw.split("\n")
    k = next((i for i, line in enumerate(lines) if i and line.strip()), None)
    if k is None:
        return False
    if _indent(lines[k]) < min_indent:
        return True  # nothing will show
    if k == len(lines) - 1:
        return False  # the line is still being written
    if not lines[k].rstrip().endswith(OPENERS):
        return True
    base = _indent(lines[k]) + 1
    return any(line.strip() and _indent(line) < base for line in lines[k + 1 :])


def _rest_and_next_line(suffix: str) -> tuple[str, str]:
    """The rest of the cursor's line and the file's next non-empty line, stripped."""
    rest, _, after = suffix.partition("\n")
    return rest.strip(), after.lstrip("\n").split("\n", 1)[0].strip()


def _begins(line: str, rest: str) -> int:
    """The length of the longest end of `line` that `rest` begins with: text that, with what
    the model writes next, may turn out to be the text the line already has after the cursor."""
    for n in range(min(len(line), len(rest)), 0, -1):
        if rest.startswith(line[-n:]):
            return n
    return 0
