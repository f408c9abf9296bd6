"""`fimgate lsp`: a pygls language server for `textDocument/inlineCompletion` (LSP 3.18).

- Incremental document sync (pygls keeps the text; positions are UTF-16 as LSP says, turned
  into code-point offsets with fimgate.efim.offsets).
- inlineCompletion: debounce, then complete; a newer request for the same document supersedes
  the older one (the service cancels its generation) - unless it only typed along the suggestion
  in flight, which it then waits for and answers from (fimgate/lsp/inflight.py). The client's
  $/cancelRequest ends the handler, not a suggestion another request may follow. A slow backend
  means no suggestion, never a frozen editor.
- didChange of one typed edit, in a document the client asks inline completions for as the person
  types, asks for the caret it leaves at once: the client's request, after its own delay, finds it in flight.
- didOpen pre-warms the cache, so the first keystroke in a file is not a cold prefill; in a file
  just opened by a client that asks as the person types, the first typed edit asks at its place
  at once (superseding that pre-warm of the file's top): an editor opening a file at its last
  place edits there first.
- Context: the other open documents' lines around their last edit (fimgate/lsp/context.py);
  documents matching a secret pattern are never context and get no completions.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from fimgate.backend.base import SamplingParams
from fimgate.efim.offsets import position_to_offset
from fimgate.lsp.context import Touched, is_secret
from fimgate.lsp.inflight import Flight, answer, may_answer, typed_along
from fimgate.lsp.protocol import FimProtocol
from fimgate.lsp.settings import TCP_LOCKED, LspSettings
from fimgate.lsp.tcp import Completers

log = logging.getLogger("fimgate.lsp")
TYPED_MAX_CHARS = 512  # longer insertions are not typing (a paste of a file, a refactoring)


class FimLanguageServer(LanguageServer):
    def __init__(
        self,
        settings: LspSettings = LspSettings(),
        completers: Completers | None = None,
        users: dict[str, str] | None = None,
        per_connection: bool = False,
    ) -> None:
        super().__init__("fimgate", "0.1.0", protocol_cls=FimProtocol)
        self.protocol.users = users
        self.protocol.per_connection = per_connection
        self.locked = TCP_LOCKED if per_connection else frozenset()  # settings not the client's over TCP
        self.settings = settings
        self.completers = completers or Completers(embedded_or_gateway(), shared=False)
        self._latest: dict[str, int] = {}  # uri -> id of the newest inline request
        self._counter = 0
        self.touched = Touched()
        self.warming: dict[str, asyncio.Future] = {}  # uri -> its didOpen pre-warm, while it runs
        self.inflight: dict[str, Flight] = {}  # uri -> the last suggestion asked for (fimgate/lsp/inflight.py)
        # per document, whether the client's last inline completion request there came as the person
        # typed (not invoked); a document not asked in yet takes its last request's anywhere
        self.asks_inline: dict[str, bool] = {}
        self.types_along = False

    async def completer(self):
        return await self.completers.get(self.settings)

    @property
    def _completer(self):
        """The completer if it is made already (edits do not wait for a model to load)."""
        return self.completers.ready

    def apply_settings(self, raw) -> None:
        """A client's settings (initializationOptions, didChangeConfiguration), less what it may not
        change; over TCP the user is the one its token names."""
        self.settings = self.settings.update(raw, self.locked)
        if self.protocol.user is not None:
            self.settings = replace(self.settings, user=self.protocol.user)

    async def end_session(self) -> None:
        """The connection ended: stop its suggestions in flight; close the completer if it is ours."""
        for flight in list(self.inflight.values()):
            flight.cancel()
        self.inflight.clear()
        await self.completers.release()

    def next_request(self, uri: str) -> int:
        self._counter += 1
        self._latest[uri] = self._counter
        return self._counter

    def is_latest(self, uri: str, rid: int) -> bool:
        return self._latest.get(uri) == rid

    def secret(self, uri: str) -> bool:
        return is_secret(uri, self.settings.context_exclude)

    def context(self, uri: str):
        """Chunks of the other open documents, for a completion in `uri`."""
        if self.settings.context_chars <= 0:
            return ()
        texts = {u: d.source for u, d in self.workspace.text_documents.items()}
        return self.touched.chunks(uri, texts, self.settings.context_chars, self.settings.context_exclude)


def embedded_or_gateway(runner=None, build=None):
    """settings -> the completer they name: the gateway's client, or the embedded engine (built by
    `build`, the CLI's engine flags, unless the settings name another model)."""

    def make(settings: LspSettings):
        if settings.gateway:
            from fimgate.lsp.completer import HttpCompleter

            return HttpCompleter(settings.gateway)
        from fimgate.lsp.completer import EmbeddedCompleter

        return EmbeddedCompleter(settings.model, runner, build)

    return make


def create_server(
    settings: LspSettings = LspSettings(),
    completers: Completers | None = None,
    users: dict[str, str] | None = None,
    per_connection: bool = False,
) -> FimLanguageServer:
    """users: token -> user; clients must initialize with one of the tokens in
    initializationOptions.token (TCP mode). completers: where completions come from (default: made
    from the settings on first use, the embedded engine or the gateway). per_connection: one
    server per TCP connection (fimgate/lsp/tcp.py)."""
    server = FimLanguageServer(settings, completers, users, per_connection)

    @server.feature(types.INITIALIZE)
    def initialize(ls: FimLanguageServer, params: types.InitializeParams) -> None:
        ls.apply_settings(params.initialization_options)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: FimLanguageServer, params: types.DidChangeConfigurationParams) -> None:
        ls.apply_settings(params.settings)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: FimLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        ls.touched.touch(doc.uri, 0)
        if ls.secret(doc.uri):
            return

        async def prewarm():
            completer = await ls.completer()
            sampling = SamplingParams(max_tokens=0)
            await completer.complete(
                ls.settings.user, doc.uri, doc.text, 0, sampling, doc.language_id or "", None, ls.context(doc.uri)
            )

        warming = ls.warming[doc.uri] = asyncio.ensure_future(prewarm())  # before any await: see inline_completion
        try:
            await warming
        except Exception as e:  # pre-warming is best effort; never an error in the editor
            log.warning("pre-warm failed for %s: %s", doc.uri, e)
        finally:
            if ls.warming.get(doc.uri) is warming:
                del ls.warming[doc.uri]

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: FimLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        for change in params.content_changes:  # pygls applied them to its copy already
            line = change.range.start.line if isinstance(change, types.TextDocumentContentChangePartial) else 0
            ls.touched.touch(uri, line)
        _ask_at_edit(ls, uri, params.content_changes)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: FimLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.touched.forget(params.text_document.uri)
        ls.inflight.pop(params.text_document.uri, None)
        ls.asks_inline.pop(params.text_document.uri, None)

    def _asker(ls: FimLanguageServer, completer, uri: str, doc, text: str, cursor: int):
        """A call that asks `completer` for the suggestion at `cursor` (with the settings now)."""
        s = ls.settings
        sampling = SamplingParams(
            max_tokens=s.max_tokens, max_predict_ms=s.max_predict_ms or None, min_token_prob=s.min_token_prob or None
        )

        def ask(on_text=None):
            # the service shapes the text (single/multi-line, clean-up): the server only carries it
            return completer.complete(
                s.user,
                uri,
                text,
                cursor,
                sampling,
                doc.language_id or "",
                True if s.multiline else None,
                ls.context(uri),
                on_text,
            )

        return ask

    def _fly(ls: FimLanguageServer, completer, uri: str, doc, text: str, cursor: int) -> Flight:
        """Ask for a suggestion at `cursor`, as the document's suggestion in flight (the service
        cancels the one before); it runs on by itself, and requests wait on it (inflight.answer)."""
        flight = ls.inflight[uri] = Flight(text[:cursor], text[cursor:])
        task = flight.task = asyncio.ensure_future(_asker(ls, completer, uri, doc, text, cursor)(flight.add))
        task.add_done_callback(flight.finish)
        task.add_done_callback(lambda t: _warn_failed(ls, t))
        return flight

    def _ask_at_edit(ls: FimLanguageServer, uri: str, changes) -> None:
        """An edit that typing makes (one incremental change, in a document whose last inline
        completion request the client made as the person typed, not on demand): ask for the caret
        it leaves at once, not when the client asks after its own delay (VS Code's 50 ms; other
        editors debounce too), unless the suggestion in flight may still answer there. The
        client's request then finds it in flight (inflight.py)."""
        s = ls.settings
        if not s.follow_in_flight or s.debounce_ms > 0 or ls._completer is None:
            return
        if not ls.asks_inline.get(uri, ls.types_along):
            return  # (a document just opened by a client that asks as the person types: the edit shows the place)
        if len(changes) != 1 or not isinstance(changes[0], types.TextDocumentContentChangePartial):
            return
        if len(changes[0].text) > TYPED_MAX_CHARS or uri not in ls.workspace.text_documents or ls.secret(uri):
            return
        # an edit while didOpen's pre-warm (of the file's top) runs supersedes it: the place is known now
        doc = ls.workspace.get_text_document(uri)
        text = doc.source
        start = changes[0].range.start  # (the text before it is the same before and after the change)
        cursor = position_to_offset(text, start.line, start.character) + len(changes[0].text)
        flight = ls.inflight.get(uri)
        typed = typed_along(flight, text[:cursor], text[cursor:])
        if typed is not None and may_answer(flight, typed):
            return
        _fly(ls, ls._completer, uri, doc, text, cursor)

    def _warn_failed(ls: FimLanguageServer, task: asyncio.Future) -> None:
        if not task.cancelled() and task.exception() is not None:
            ls.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=f"fimgate: {task.exception()}"))

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: FimLanguageServer, params: types.InlineCompletionParams):
        uri = params.text_document.uri
        rid = ls.next_request(uri)
        s = ls.settings
        await asyncio.sleep(s.debounce_ms / 1000)
        if not ls.is_latest(uri, rid):
            return None  # superseded while debouncing
        if uri not in ls.workspace.text_documents or ls.secret(uri):
            return None  # never opened (no reading files behind the editor's back), or a secret
        warming = ls.warming.get(uri)
        if warming is not None:  # sent after it, the pre-warm would supersede this request: let it finish
            await asyncio.wait([warming], timeout=s.timeout_ms / 1000)
        doc = ls.workspace.get_text_document(uri)
        text = doc.source
        cursor = position_to_offset(text, params.position.line, params.position.character)
        before, after = text[:cursor], text[cursor:]
        timeout_s = s.timeout_ms / 1000
        try:
            completer = await ls.completer()

            if not s.follow_in_flight:  # each key asks anew and waits for the whole suggestion
                ask = _asker(ls, completer, uri, doc, text, cursor)
                shown, completion_id = await asyncio.wait_for(ask(), timeout_s)
            else:
                # it asks as the person types (asking at the edit is worth it), or when invoked (not at every edit)
                ls.types_along = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
                ls.asks_inline[uri] = ls.types_along
                flight = ls.inflight.get(uri)
                typed = typed_along(flight, before, after)
                got = None if typed is None else await answer(flight, typed, timeout_s)
                if got is None and not (typed == "" and flight.done):  # (the same place, which had nothing: no)
                    flight = _fly(ls, completer, uri, doc, text, cursor)
                    got = await answer(flight, "", timeout_s)
                shown, completion_id = got or ("", "")
        except asyncio.TimeoutError:
            return None
        except asyncio.CancelledError:
            raise
        except Exception as e:
            ls.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=f"fimgate: {e}"))
            return None
        if not ls.is_latest(uri, rid):
            return None
        if not shown:
            return None
        pos = params.position
        # on accept the client runs the item's command: the gateway counts it (acceptance events)
        accepted = (
            types.Command(title="fimgate: accepted", command="fimgate.accepted", arguments=[completion_id, len(shown)])
            if completion_id
            else None
        )
        return types.InlineCompletionList(
            items=[types.InlineCompletionItem(insert_text=shown, range=types.Range(start=pos, end=pos), command=accepted)]
        )

    @server.command("fimgate.accepted")
    async def accepted(ls: FimLanguageServer, *args) -> None:
        """The client accepted a suggestion (LSP 3.18 runs the item's command, [id, chars]): tell the
        gateway. Arguments are checked here, untyped (pygls would structure annotated ones)."""
        completion_id = args[0] if args and isinstance(args[0], str) else ""
        chars = args[1] if len(args) > 1 and type(args[1]) is int else None
        if not completion_id:
            return
        try:
            await (await ls.completer()).event(ls.settings.user, "select", completion_id, chars)
        except Exception as e:  # best effort; never an error in the editor
            log.warning("acceptance event failed: %s", e)

    @server.command("fimgate.debugDocument")
    def debug_document(ls: FimLanguageServer, uri: str) -> str | None:
        """The server's copy of a document the client opened, to check that incremental sync kept
        it right; None for any other URI (the server never reads a file the editor did not open)."""
        doc = ls.workspace.text_documents.get(uri) if isinstance(uri, str) else None
        return None if doc is None else doc.source

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: FimLanguageServer, params) -> None:
        await ls.end_session()

    return server
