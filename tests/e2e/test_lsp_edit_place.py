"""`fimgate lsp`: in a file just opened by a client that asks as the person types, the first typed
edit asks for the place it leaves at once, before the client's own request: an editor that opens
a file at its last place edits there first, and the window around it is the prefill the first key
would otherwise wait for (fimgate/lsp/server.py, _ask_at_edit). The server's request log says what
it asked (--request-log: kinds and costs, never text)."""

import asyncio
import os
import sys
import tempfile

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from fimgate.gateway.request_log import read_log

LOG = os.path.join(tempfile.mkdtemp(prefix="fimgate-lsp-edit-"), "requests.jsonl")
BIG = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(120))


@pytest_lsp.fixture(
    scope="module", config=ClientServerConfig(server_command=[sys.executable, "-m", "fimgate", "lsp", "--request-log", LOG])
)
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(), initialization_options={"fimgate": {"maxTokens": 8, "timeoutMs": 60000}}
        )
    )
    yield
    await lsp_client.shutdown_session()


def _open(client, uri, text):
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )


def _edit(client, uri, version, line, character, length, text):
    end = types.Position(line, character + length)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(range=types.Range(types.Position(line, character), end), text=text)
            ],
        )
    )


KEYS = ("typing", "first_window")  # a key's request: the full window, or a short one while it fills


def _typing() -> int:
    return sum(r["kind"] in KEYS for r in read_log(LOG)) if os.path.exists(LOG) else 0


async def _settled(n: int, timeout_s: float = 60) -> int:
    """The count of typing requests logged, once it reached n (or the timeout passed)."""
    for _ in range(int(timeout_s * 10)):
        if _typing() >= n:
            break
        await asyncio.sleep(0.1)
    return _typing()


@pytest.mark.asyncio(loop_scope="module")
async def test_the_first_edit_in_a_file_just_opened_asks_at_its_place(client: LanguageClient):
    first = "file:///work/demo/first.py"
    _open(client, first, "def add(a, b):\n    return \n")
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=first),
            position=types.Position(line=1, character=11),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
    )
    assert result is not None  # the client asks as the person types
    before = await _settled(1)
    second = "file:///work/demo/big.py"
    _open(client, second, BIG)
    await asyncio.sleep(0.2)
    _edit(client, second, 2, 301, 15, 2, "")  # deep in the file, no request from the client
    assert await _settled(before + 1) == before + 1  # the server asked there itself
    last = [r for r in read_log(LOG) if r["kind"] in KEYS][-1]
    # the window around line 301, not the file's top: a full one, or a first window, whose prefix
    # (up to 128 tokens, cut at a line) would be empty at the top and its suffix 32 tokens
    assert (last["usage"] or {}).get("prompt_tokens", 0) > (200 if last["kind"] == "typing" else 64)
