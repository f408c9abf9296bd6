"""Context from other files, and secrets, in real VS Code with the packaged extension: the person
opens a `.env` file and a module, then types in a third file. Every request the extension sends
passes through a recording proxy to `fimgate serve`: the module's lines reach the gateway as
`input_extra`, and nothing of the `.env` file ever leaves the editor (no chunk, no warm-up, no
completion in it).

Needs `tests/e2e/vscode/setup.sh`; skipped without it unless FIMGATE_E2E_VSCODE=1 (CI sets it).
"""

import json
import os
import threading

import pytest

from fimgate.bench.common.served import start_serve
from fimgate.bench.editor.vscode_rig import FIMGATE_VSIX, TOOLCHAIN, code_server, drive
from tests.e2e.recorder import Recorder

SOURCE = "def fibonacci(n):\n    if n < 2:\n        return n\n    return fib\n\n\nprint(fibonacci(10))\n"
UTIL = (
    "def memo(f):\n    cache = {}\n\n    def wrapped(n):\n        if n not in cache:\n"
    "            cache[n] = f(n)\n        return cache[n]\n\n    return wrapped\n"
)
SECRET = "sk-live-hunter2-93f1c0de"
ENV = f"API_KEY={SECRET}\nDATABASE_URL=postgres://admin:{SECRET}@db/prod\n"

ready = all(os.path.exists(p) for p in (*TOOLCHAIN, FIMGATE_VSIX))
if not ready and os.environ.get("FIMGATE_E2E_VSCODE") != "1":
    pytest.skip("run tests/e2e/vscode/setup.sh first (real VS Code toolchain)", allow_module_level=True)


def test_context_reaches_the_gateway_and_secrets_never_do(tmp_path):
    assert ready, "the VS Code e2e toolchain is missing: run tests/e2e/vscode/setup.sh"
    gateway, gw_url = start_serve()
    proxy = Recorder(gw_url)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    settings = {"fimgate.gatewayUrl": f"http://127.0.0.1:{proxy.server_address[1]}"}
    files = {"fib.py": SOURCE, "util.py": UTIL, ".env": ENV}
    try:
        with code_server(tmp_path, FIMGATE_VSIX, settings, files) as (url, work, env):
            result = drive(url, "fib.py", str(tmp_path / "out"), 4, env, openFirst=[".env", "util.py"])
    finally:
        proxy.shutdown()
        gateway.terminate()
        gateway.wait(timeout=10)
    asks = [e for e in proxy.log if e["path"] == "/v1/completions" and isinstance(e["request"], dict)]
    for e in asks:
        q = e["request"]
        extra = [c["filename"] for c in q.get("input_extra") or []]
        print(f"{q['document'].rsplit('/', 1)[-1]} max_tokens={q['max_tokens']} input_extra={extra} -> {e['status']}")
    assert result["shown"].strip(), "no ghost text was shown"
    typed = [e["request"] for e in asks if e["request"]["document"].endswith("fib.py") and e["request"]["max_tokens"] > 0]
    assert typed, "the extension asked nothing for fib.py"
    # the module the person came from is context of the typing requests, its text as it is in the file
    assert all([c["filename"] for c in q.get("input_extra", [])] == ["util.py"] for q in typed)
    assert all(q["input_extra"][0]["text"] in UTIL and "cache[n] = f(n)" in q["input_extra"][0]["text"] for q in typed)
    # nothing of the .env file left the editor: not as context, not as a document of its own
    assert not any(e["request"]["document"].endswith(".env") for e in asks)
    assert SECRET not in json.dumps(proxy.log)
