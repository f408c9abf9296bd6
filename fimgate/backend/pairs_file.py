"""Two-column text files ('KEY USER', 'USER TENANT'): one pair a line, '#' comments."""

from __future__ import annotations


def read_pairs(path: str, columns: str) -> dict[str, str]:
    """{first: second} from `path`; `columns` names them for the error message."""
    pairs = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                raise ValueError(f"{path}:{n}: expected '{columns}'")
            pairs[parts[0]] = parts[1]
    return pairs
