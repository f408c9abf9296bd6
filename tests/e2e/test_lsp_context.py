"""`fimgate lsp` with context from the other open documents, and secrets: a protocol-level client
(pytest-lsp) opens a `.env` file, a module it edits, and the file it types in; the server runs
against `fimgate serve` through a recording proxy. The module's lines reach the gateway as
`input_extra`; nothing of the `.env` file is ever sent (no pre-warm, no context, no completion)."""

import asyncio
import json
import sys
import threading

import httpx
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from fimgate.bench.common.served import start_serve
from tests.e2e.recorder import Recorder

SECRET = "sk-live-hunter2-93f1c0de"
FILES = {
    "file:///w/.env": f"API_KEY={SECRET}\n",
    "file:///w/util.py": "def memo(f):\n    cache = {}\n    return cache\n",
    "file:///w/fib.py": "def fibonacci(n):\n    if n < 2:\n        return n\n    return fib\n",
}
PROXY: list[Recorder] = []


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=[sys.executable, "-m", "fimgate", "lsp"]))
async def client(lsp_client: LanguageClient):
    gateway, url = start_serve()
    proxy = Recorder(url)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    PROXY.append(proxy)
    options = {
        "fimgate": {"gateway": f"http://127.0.0.1:{proxy.server_address[1]}", "debounceMs": 0, "maxTokens": 8, "timeoutMs": 60000}
    }
    lsp_client.init_result = await lsp_client.initialize_session(
        types.InitializeParams(capabilities=types.ClientCapabilities(), initialization_options=options)
    )
    yield
    await lsp_client.shutdown_session()
    proxy.shutdown()
    gateway.terminate()
    gateway.wait(timeout=10)


async def _inline(client, uri, line, character):
    return await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
    )


@pytest.mark.asyncio(loop_scope="module")
async def test_other_documents_are_context_and_secrets_never_leave(client: LanguageClient):
    for uri, text in FILES.items():
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(uri=uri, language_id="", version=1, text=text))
        )
    edit = types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(2, 16), types.Position(2, 16)), text="  # memo"
    )
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(uri="file:///w/util.py", version=2), [edit])
    )
    assert await _inline(client, "file:///w/.env", 0, 8) is None  # no completion inside a secret file
    result = await _inline(client, "file:///w/fib.py", 3, 14)
    assert result is not None and result.items and result.items[0].insert_text.strip()
    # accepting runs the item's command (LSP 3.18): the gateway counts it for this user
    item = result.items[0]
    assert item.command is not None and item.command.command == "fimgate.accepted"
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=item.command.command, arguments=item.command.arguments)
    )
    log = PROXY[0].log
    asks = [e["request"] for e in log if e["path"] == "/v1/completions"]
    typed = [q for q in asks if q["document"].endswith("fib.py") and q["max_tokens"] > 0]
    assert typed and all([c["filename"] for c in q["input_extra"]] == ["util.py"] for q in typed)
    assert "cache = {}" in typed[-1]["input_extra"][0]["text"] and "# memo" in typed[-1]["input_extra"][0]["text"]
    assert not any(q["document"].endswith(".env") for q in asks)
    assert SECRET not in json.dumps(log)
    events = [e for e in log if e["path"] == "/v1/events"]
    assert [e["request"]["type"] for e in events] == ["select"] and events[0]["status"] == 200
    summary = httpx.get(PROXY[0].upstream + "/v1/events/summary", params={"user": "local"}, timeout=30).json()
    assert summary["total"]["shown"] == 1 and summary["total"]["accepted"] == 1


@pytest.mark.asyncio(loop_scope="module")
async def test_a_typed_key_is_asked_for_at_the_edit(client: LanguageClient):
    """An editor asks after its own delay (VS Code 50 ms, others debounce): the server asks the
    gateway as soon as the key's didChange arrives, and the editor's request finds that answer.
    (A key typed along the suggestion in flight is answered from it: this one types against it.)"""
    uri = "file:///w/fib.py"
    assert await _inline(client, uri, 3, 14) is not None  # the client asks inline completions here
    key = types.TextDocumentContentChangePartial(range=types.Range(types.Position(3, 14), types.Position(3, 14)), text="x")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(uri=uri, version=2), [key])
    )

    def asked_after_key():
        with PROXY[0].lock:
            return [
                e["request"]
                for e in PROXY[0].log
                if e["path"] == "/v1/completions"
                and e["request"]["max_tokens"] > 0
                and e["request"]["prompt"].endswith("return fibx")
            ]

    for _ in range(600):  # no inline request sent yet: only the didChange can have asked
        if asked_after_key():
            break
        await asyncio.sleep(0.1)
    assert len(asked_after_key()) == 1 and asked_after_key()[0]["suffix"] == "\n"
    result = await _inline(client, uri, 3, 15)
    assert result is not None and result.items and result.items[0].insert_text.strip()
    assert len(asked_after_key()) == 1  # the editor's request was answered by the one asked at the edit
