"""What a person should see of a raw completion: no trailing whitespace, nothing that repeats
the text already after the cursor, one line unless multi-line was asked for."""
from __future__ import annotations


def tidy(completion: str, suffix: str, multiline: bool = False) -> str:
    text = completion if multiline else completion.split("\n", 1)[0]
    text = "\n".join(line.rstrip() for line in text.split("\n")).rstrip()
    if not text.strip():
        return ""
    after = suffix.split("\n", 1)[0]
    if after.strip() and text.endswith(after.strip()):
        text = text[: len(text) - len(after.strip())].rstrip()  # drop what the line already ends with
    first_line_after = suffix.lstrip("\n").split("\n", 1)[0]
    if multiline and first_line_after.strip() and text.split("\n")[-1].strip() == first_line_after.strip():
        text = text[: text.rfind("\n")]  # the last line repeats the next line of the file
    return text
