"""`fimgate bench editor --accepting`: the accepting typist (fimgate/bench/typist/person.py) in real
VS Code. The person decides, as in `bench replay --accepting`; tests/e2e/vscode/typist.js is their
hands and eyes in code-server: it types the trace's keys at the person's times, reports the ghost
text each time it changes on screen, and takes a suggestion with Tab or accept-word presses when
the person does. The extension under test does everything else as a person's would (its requests,
cache, prefetch, warm-ups); the person's clock is the wall clock. At the end the files are saved
and must hold what the trace typed (the person only ever takes what they would have typed).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from fimgate.bench.editor.vscode import TYPING_SETTINGS, Client, _first_difference, _line_col
from fimgate.bench.editor.vscode_rig import HERE, code_server
from fimgate.bench.typist.person import PRESS_MS, Person
from fimgate.bench.typist.rule import LLAMA_VSCODE, VSCODE
from fimgate.bench.typist.script import Step


class _Hands:
    """typist.js over a pipe: one command, one answer."""

    def __init__(self, url: str, options: dict, env: dict) -> None:
        self.proc = subprocess.Popen(
            ["node", os.path.join(HERE, "typist.js"), url, json.dumps(options)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.ready_at = self._answer()["at"]

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("typist.js ended without an answer")
        r = json.loads(line)
        if not r.get("ok"):
            raise RuntimeError(f"typist.js: {r.get('error')}")
        return r

    def do(self, **command) -> dict:
        self.proc.stdin.write(json.dumps(command) + "\n")
        return self._answer()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def _opened(steps: list[Step]) -> dict[str, str]:
    """file -> its text when first opened (written to the workspace before VS Code starts)."""
    files: dict[str, str] = {}
    for s in steps:
        if s.op == "open":
            files.setdefault(s.file, s.text)
    return files


def typed(steps: list[Step]) -> dict[str, str]:
    """file -> its text after every step typed (no accepts): what the files must hold."""
    docs: dict[str, str] = {}
    cursor = 0
    for s in steps:
        if s.op == "open":
            docs[s.file], cursor = s.text, 0
        elif s.op == "move":
            cursor = s.offset
        elif s.op == "delete":
            docs[s.file] = docs[s.file][: s.offset] + docs[s.file][s.offset + s.length :]
            cursor = s.offset
        else:
            unit = s.text + s.then
            docs[s.file] = docs[s.file][:cursor] + unit + docs[s.file][cursor:]
            cursor += len(unit)
    return docs


def type_accepting(client: Client, steps: list[Step], reaction_ms: float, workdir: str) -> dict:
    """The person types `steps` in a fresh code-server with `client` installed, taking right
    suggestions; their summary, and whether the saved files hold what the trace typed."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-typist-{client.name}-", dir=workdir))
    files = _opened(steps)
    if client.open_first:
        files[client.open_first] = "notes\n"
    words = LLAMA_VSCODE if client.name.startswith("llama.vscode") else VSCODE
    person = Person(steps, reaction_ms, words=words)
    options = {"status": client.status, "openFirst": client.open_first, "closeTab": client.close_tab}
    with code_server(tmp, client.vsix, {**TYPING_SETTINGS, **client.settings}, {}) as (url, work, env):
        for f, text in files.items():
            (work / f).parent.mkdir(parents=True, exist_ok=True)
            (work / f).write_text(text, encoding="utf-8")
        hands = _Hands(url, options, env)
        try:
            t0 = hands.ready_at + 500  # (VS Code settles)
            opened: set[str] = set()
            late = []  # how far behind the person's time each action began (the driver's own lag, absorbed)
            timeline = []  # (person's ms, wall ms, what): the screen's changes and the person's actions
            while not person.done:
                t = person.next_ms()
                known = person.screen.text if person.screen is not None else ""
                r = hands.do(op="watch", known=known, until=t0 + t)
                if not r.get("timeout"):
                    person.seen(r["text"], r["at"] - t0)
                    timeline.append((r["at"] - t0, r["at"], "shown " + r["text"][:60]))
                    continue
                before = person.file
                action, _ = person.act()  # (its asks are the extension's to make: it makes its own)
                behind = r["at"] - t0 - action.t_ms
                late.append(max(0, behind))
                if behind > 0:  # the last action took longer than the gap after it (a file opened,
                    t0 += behind  # Go to Line): the person's clock waits, so their gaps stay theirs
                s = action.step
                f = person.file
                timeline.append((action.t_ms, r["at"], "accept " + action.taken.kind if s is None else f"{s.op} {s.text[:20]!r}"))
                if s is None:
                    taken = action.taken
                    hands.do(op="accept", kind=taken.kind, presses=taken.presses, press_ms=PRESS_MS, then=action.then)
                elif s.op == "open":
                    if before is not None and before != s.file:
                        hands.do(op="save")
                    hands.do(op="open", file=s.file, text=s.text, first=s.file not in opened)
                    opened.add(s.file)
                elif s.op in ("move", "delete"):
                    line, col = _line_col(person.docs[f], s.offset)
                    hands.do(op=s.op, line=line, col=col, length=s.length)
                else:
                    hands.do(op=s.op, text=s.text, then=s.then)
            hands.do(op="save")
            hands.do(op="end", screenshot=str(tmp / "end.png"))
        finally:
            hands.close()
        saved = {f: (work / f).read_text(encoding="utf-8") for f in person.docs}
    truth = typed(steps)
    mismatches = [_first_difference(f, saved[f], text) for f, text in truth.items()]
    mismatches += [_first_difference(f"{f} (the person's)", person.docs[f], text) for f, text in truth.items()]
    mismatches = [m for m in mismatches if m]
    summary = person.summary()
    late.sort()
    at = {"p50": 0.5, "p90": 0.9}
    summary["driver_late_ms"] = {q: late[min(len(late) - 1, int(f * len(late)))] if late else None for q, f in at.items()}
    summary["faithful"] = not mismatches  # the saved files hold what the person's document holds
    summary["mismatches"] = mismatches
    summary["screenshot"] = str(tmp / "end.png")
    summary["timeline"] = timeline
    return summary
