"""`fimgate bench lsp`: what a person in an LSP editor (Neovim, Helix, Zed, Emacs) sees, at the
protocol level. The same keystrokes as `fimgate bench editor` (a slice of a trace, real gaps)
go to `fimgate lsp` as an editor sends them: didOpen, an incremental didChange per key, then
`textDocument/inlineCompletion` at the new cursor. Per key: the time from the didChange to the
answer, or none when the next key came first (the editor moves on; the server's own supersede
cancels the old request) or the answer was empty; the text; useful if the person's next typed
text starts with it. Summarized exactly as bench editor does (fimgate/bench/editor/vscode.py).

Opening a file takes 1.8 s before the next key, as Quick Open does in bench editor's replay (the
server pre-warms meanwhile); before the first file the server is given time to load its model.
What this leaves out, against a real editor: its drawing, and by default its own delay before
asking (VS Code adds ~50 ms and ~15 ms, measured at 30223bc), so it measures the server;
`--client-delay-ms 50` asks that long after each key (times still count from the key).
"""

from __future__ import annotations

import asyncio
import sys
import time

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from fimgate.bench.common.memory import rss_bytes
from fimgate.bench.editor.vscode import Slice, summarize
from fimgate.efim.offsets import line_starts, offset_to_position

OPEN_S = 1.8  # a file opened: the time VS Code's Quick Open takes in bench editor's replay, before the first key


def _offset(text: str, line: int, col: int) -> int:
    """1-based line and code-point column (the slice's steps) -> offset."""
    starts = line_starts(text)
    return min(len(text), starts[min(line, len(starts)) - 1] + col - 1)


class _Doc:
    def __init__(self, client: LanguageClient, uri: str, text: str) -> None:
        self.client, self.uri, self.text, self.version, self.cursor = client, uri, text, 1, 0

    def edit(self, start: int, end: int, new: str) -> None:
        """Replace text[start:end] with `new`, and tell the server (incremental sync)."""
        a, b = offset_to_position(self.text, start), offset_to_position(self.text, end)
        self.text = self.text[:start] + new + self.text[end:]
        self.version += 1
        change = types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=a[0], character=a[1]), end=types.Position(line=b[0], character=b[1])),
            text=new,
        )
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version), content_changes=[change]
            )
        )
        self.cursor = start + len(new)


def _params(doc: _Doc) -> types.InlineCompletionParams:
    line, ch = offset_to_position(doc.text, doc.cursor)
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=doc.uri),
        position=types.Position(line=line, character=ch),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
    )


async def _ask(doc: _Doc, t0: float, window_s: float) -> tuple[float | None, str]:
    """Ask at the cursor; (ms from the key at t0 to a non-empty answer, or None, the text)."""
    params = _params(doc)
    answer = asyncio.ensure_future(doc.client.text_document_inline_completion_async(params))
    done, _ = await asyncio.wait([answer], timeout=window_s)  # a late answer is left to arrive unread
    if not done:
        return None, ""
    result = answer.result()
    items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
    text = items[0].insert_text if items and isinstance(items[0].insert_text, str) else ""
    return (round((time.perf_counter() - t0) * 1000, 1) if text.strip() else None), text


async def _replay(sl: Slice, server: list[str], settings: dict, delay_s: float = 0.0, rss: list | None = None) -> list[dict]:
    """rss: gets the server process's resident memory (bytes) sampled after every key, and at the end."""
    client = LanguageClient("fimgate-bench-lsp", "1")
    await client.start_io(*server)
    pid = client._server.pid if getattr(client, "_server", None) is not None else None
    await client.initialize_async(
        types.InitializeParams(capabilities=types.ClientCapabilities(), initialization_options={"fimgate": settings})
    )
    client.initialized(types.InitializedParams())
    docs: dict[str, _Doc] = {}
    doc: _Doc | None = None
    keys: list[dict] = []
    try:
        for s in sl.steps:
            if s["op"] == "open":
                uri = f"file:///workspace/{s['file']}"
                if uri not in docs:
                    docs[uri] = _Doc(client, uri, s["text"])
                    language = "python" if uri.endswith(".py") else ""
                    item = types.TextDocumentItem(uri=uri, language_id=language, version=1, text=s["text"])
                    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
                doc = docs[uri]
                if doc.text != s["text"]:
                    doc.edit(0, len(doc.text), s["text"])
                if len(docs) == 1 and not keys:  # the editor just started: the server loads its model
                    await doc.client.text_document_inline_completion_async(_params(doc))
                await asyncio.sleep(max(OPEN_S, s.get("wait_ms", 0) / 1000))
            elif s["op"] == "move":
                doc.cursor = _offset(doc.text, s["line"], s["col"])
                await asyncio.sleep(s.get("wait_ms", 0) / 1000)  # the person's pause after it
            elif s["op"] == "delete":
                at = _offset(doc.text, s["line"], s["col"])
                doc.edit(at, at + s["length"], "")
                await asyncio.sleep(s.get("wait_ms", 0) / 1000)
            elif s["op"] in ("key", "paste"):
                doc.edit(doc.cursor, doc.cursor, s["text"] + s.get("then", ""))  # then: the editor's auto-indent
                if s["op"] == "key":
                    t0 = time.perf_counter()
                    window_s = s["wait_ms"] / 1000
                    shown_ms, text = None, ""
                    if delay_s < window_s:  # (else the next key comes first: the editor never asks)
                        await asyncio.sleep(delay_s)  # the editor's own wait before it asks
                        shown_ms, text = await _ask(doc, t0, max(0.001, window_s - (time.perf_counter() - t0)))
                    keys.append({"window_ms": s["wait_ms"], "shown_ms": shown_ms, "text": text})
                    if rss is not None and pid is not None:
                        rss.append(rss_bytes(pid))
                    await asyncio.sleep(max(0.0, s["wait_ms"] / 1000 - (time.perf_counter() - t0)))
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
    return keys


def bench_lsp(sl: Slice, serve_flags: list[str], settings: dict, delay_s: float = 0.0) -> dict:
    """Replay the slice against `fimgate lsp SERVE_FLAGS` (embedded engine by default); the
    client waits `delay_s` after each key before it asks, as editors do."""
    rss: list[int | None] = []
    keys = asyncio.run(_replay(sl, [sys.executable, "-m", "fimgate", "lsp", *serve_flags], settings, delay_s, rss))
    out = summarize(keys, sl.typed_next)
    seen = [r for r in rss if r]
    if seen:  # the server's resident memory over the replay: what it ends at and its peak
        at = lambda i: round(seen[min(len(seen) - 1, i)] / 1e6, 1)  # noqa: E731
        out["server_rss_mb"] = {
            "first_key": at(0),
            "middle": at(len(seen) // 2),
            "last": at(-1),
            "max": round(max(seen) / 1e6, 1),
        }
    return out
