"""`fimgate lsp` end to end: pytest-lsp starts the server as a subprocess and speaks LSP to it,
with the real bundled model behind it."""

import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

URI = "file:///work/demo/fib.py"
TEXT = "def fibonacci(n):\r\n    if n < 2:\r\n        return n\r\n    \r\n\r\nprint('naïve 😀', fibonacci(10))\r\n"


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=[sys.executable, "-m", "fimgate", "lsp"]))
async def client(lsp_client: LanguageClient):
    lsp_client.init_result = await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            initialization_options={"fimgate": {"debounceMs": 10, "maxTokens": 16, "timeoutMs": 60000}},
        )
    )
    yield
    await lsp_client.shutdown_session()


def _type(client, version, line, character, text):
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(line, character), end=types.Position(line, character)), text=text
                )
            ],
        )
    )


async def _inline(client, line, character):
    return await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=URI),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
    )


@pytest.mark.asyncio(loop_scope="module")
async def test_server_advertises_inline_completion(client: LanguageClient):
    assert client.init_result.capabilities.inline_completion_provider is not None


@pytest.mark.asyncio(loop_scope="module")
async def test_type_then_get_a_completion_from_the_real_model(client: LanguageClient):
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(uri=URI, language_id="python", version=1, text=TEXT))
    )
    for i, ch in enumerate("return fib"):  # typed one key at a time on line 3, after 4 spaces
        _type(client, 2 + i, 3, 4 + i, ch)
    result = await _inline(client, 3, 14)
    assert result is not None and result.items
    item = result.items[0]
    assert item.insert_text.strip() and "\n" not in item.insert_text
    assert item.range.start == types.Position(3, 14)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_newer_request_supersedes_an_older_one(client: LanguageClient):
    import asyncio

    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"fimgate": {"debounceMs": 300}}))
    _type(client, 20, 3, 14, "o")
    first = asyncio.ensure_future(_inline(client, 3, 15))
    await asyncio.sleep(0.05)  # the first request is on the wire; the person types on
    _type(client, 21, 3, 15, "n")
    second = await _inline(client, 3, 16)
    assert await first is None  # superseded: no stale suggestion
    assert second is not None and second.items
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"fimgate": {"debounceMs": 10}}))


@pytest.mark.asyncio(loop_scope="module")
async def test_positions_are_utf16_on_a_crlf_line_with_astral_text(client: LanguageClient):
    # line 5: print('naïve 😀', fibonacci(10)) -- the emoji is 2 UTF-16 units
    col = len("print('naïve ") + 2 + len("', ")  # just before "fibonacci"
    _type(client, 30, 5, col, "x")
    doc_line = "print('naïve 😀', xfibonacci(10))"
    result = await _inline(client, 5, col + 1)
    # whatever the model says, the server must have put the cursor right after the typed "x"
    if result is not None:
        assert result.items[0].range.start == types.Position(5, col + 1)
    assert doc_line  # the edit landed where the client meant: checked through the server's view below
    text = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="fimgate.debugDocument", arguments=[URI])
    )
    assert text.split("\r\n")[5] == doc_line


@pytest.mark.asyncio(loop_scope="module")
async def test_cancel_request_leaves_the_server_serving(client: LanguageClient):
    import asyncio

    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"fimgate": {"debounceMs": 300}}))
    params = types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI),
        position=types.Position(line=3, character=16),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
    )
    pending = client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id="to-cancel")
    await asyncio.sleep(0.05)
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="to-cancel"))
    await asyncio.sleep(0.5)
    assert pending.done()  # answered (cancelled) without waiting for the model
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"fimgate": {"debounceMs": 10}}))
    after = await _inline(client, 3, 16)
    assert after is not None and after.items  # and the server goes on serving


@pytest.mark.asyncio(loop_scope="module")
async def test_a_key_typed_along_the_suggestion_is_answered_with_its_rest(client: LanguageClient):
    """fimgate/lsp/inflight.py: the next key, typed as the suggestion begins, gets the rest of the
    same suggestion, never a shorter or different one (tests/unit/test_lsp_inflight.py: how)."""
    uri, text = "file:///work/demo/along.py", "def add(a, b):\n    return \n"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )

    def key(version, character, ch):
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(start=types.Position(1, character), end=types.Position(1, character)), text=ch
                    )
                ],
            )
        )

    async def ask(character):
        return await client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=1, character=character),
                context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
            )
        )

    first = (await ask(11)).items[0].insert_text
    assert len(first) >= 1
    key(2, 11, first[0])
    along = await ask(12)
    assert along is not None and along.items
    assert along.items[0].insert_text.startswith(first[1:])  # the same suggestion, on from the typed character
