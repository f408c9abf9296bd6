"""What the person of a keystroke trace does, step by step, on the clock `bench editor` types it.

A slice of a trace (../shared/traces/README.md) from its start until `keys` single-character keys
were typed, as steps: open a file, move the cursor, delete, type a key (with the editor's
auto-indent that came with it), paste. Gaps longer than MAX_GAP_MS are cut to it, as `bench editor`
cuts them (the same slice and clock in the replay and in real VS Code). Offsets are code points of
the file's text as the trace has it then; an accepting typist's document is the same text at every
step (what it accepts is what the trace typed), so they stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_GAP_MS = 2000.0  # longer pauses in the trace are cut to this (bench editor's window of a key)
AUTO_WITH_KEY_MS = 20  # an auto-indent this soon after a key is the editor's answer to that key


@dataclass(frozen=True)
class Step:
    op: str  # "open", "move", "delete", "key", "paste"
    t_ms: float  # on the slice's clock: 0 at its first event, gaps cut to MAX_GAP_MS
    file: str
    offset: int = 0  # move, delete: where
    length: int = 0  # delete: how many code points
    text: str = ""  # open: the file's whole text; key: the character typed; paste: what was pasted
    then: str = ""  # key: the editor's auto-indent that came with it (typed by nobody)


def steps_of(events: list[dict], keys: int) -> list[Step]:
    """The trace's steps until `keys` keys were typed (all of them where it has fewer)."""
    out: list[Step] = []
    clock, last_t, typed = 0.0, None, 0
    for i, ev in enumerate(events):
        kind, f = ev.get("type"), ev.get("file")
        if kind not in ("open", "move", "delete", "insert"):
            continue
        if last_t is not None:
            clock += max(0.0, min(MAX_GAP_MS, ev["t"] - last_t))
        last_t = ev["t"]
        if kind == "open":
            out.append(Step("open", clock, f, text=ev["text"]))
        elif kind == "move":
            out.append(Step("move", clock, f, offset=ev["offset"]))
        elif kind == "delete":
            out.append(Step("delete", clock, f, offset=ev["offset"], length=ev["length"]))
        elif (
            ev.get("auto")
            and out
            and out[-1].op == "key"
            and out[-1].file == f
            and ev["t"] - events[i - 1]["t"] <= AUTO_WITH_KEY_MS
        ):
            k = out[-1]
            out[-1] = Step("key", k.t_ms, f, text=k.text, then=k.then + ev["text"])
            clock = k.t_ms  # the key's gap runs from the key
            last_t = events[i - 1]["t"]
        elif len(ev["text"]) == 1 and not ev.get("auto"):
            if typed >= keys:
                break
            out.append(Step("key", clock, f, text=ev["text"]))
            typed += 1
        else:  # a paste (or an auto-indent on its own): text nobody typed key by key
            out.append(Step("paste", clock, f, text=ev["text"]))
    while out and out[-1].op != "key":  # the slice ends at its last key
        out.pop()
    return out
