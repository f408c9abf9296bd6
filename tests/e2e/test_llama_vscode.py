"""llama.vscode 0.0.63, unchanged, in real VS Code against `fimgate serve`: built from its source in
../shared/clients by tests/e2e/vscode/setup.sh, installed into code-server, pointed at fimgate's
llama.cpp-compatible endpoint with its ring-buffer context on. Type in a Python file, ghost text
appears, Tab accepts, the file holds it. Every request llama.vscode sends and fimgate's answer pass
through a recording proxy and are printed (run with -s to see them).

Skipped without the toolchain unless FIMGATE_E2E_VSCODE=1 (CI sets it).
"""

import json
import os
import threading

import pytest

from fimgate.bench.common.served import start_serve
from fimgate.bench.editor.vscode_rig import LLAMA_VSCODE_VSIX, TOOLCHAIN, code_server, drive
from tests.e2e.recorder import Recorder

VSIX = LLAMA_VSCODE_VSIX
SOURCE = "def fibonacci(n):\n    if n < 2:\n        return n\n    return fib\n\n\nprint(fibonacci(10))\n"
NOTES = "fibonacci numbers: each is the sum of the two before it\n"

ready = all(os.path.exists(p) for p in (*TOOLCHAIN, VSIX))
if not ready and os.environ.get("FIMGATE_E2E_VSCODE") != "1":
    pytest.skip("run tests/e2e/vscode/setup.sh first (builds llama.vscode from ../shared)", allow_module_level=True)


def _brief(e: dict) -> str:
    q, a = e["request"] or {}, e["answer"] if isinstance(e["answer"], dict) else {}
    sent = {k: q[k] for k in ("prompt", "n_predict", "n_indent", "t_max_predict_ms") if k in q}
    sent["input_prefix_end"] = (q.get("input_prefix") or "")[-30:]
    sent["input_extra"] = [c.get("filename", "").rsplit("/", 1)[-1] for c in q.get("input_extra") or []]
    got = {k: a.get(k) for k in ("content", "stop_type", "tokens_cached") if k in a}
    got["predicted_ms"] = round((a.get("timings") or {}).get("predicted_ms") or 0, 1)
    return f"{e['method']} {e['path']} {json.dumps(sent)} -> {e['status']} {json.dumps(got)}"


def test_llama_vscode_unchanged_shows_and_accepts_fimgate_suggestions(tmp_path):
    assert ready, "llama.vscode or the VS Code toolchain is missing: run tests/e2e/vscode/setup.sh"
    out = os.environ.get("FIMGATE_E2E_OUT_LLAMA") or str(tmp_path / "out")
    gateway, gw_url = start_serve()
    proxy = Recorder(gw_url)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    settings = {
        "llama-vscode.endpoint": f"http://127.0.0.1:{proxy.server_address[1]}",
        "llama-vscode.ask_install_llamacpp": False,
        "llama-vscode.rag_enabled": False,
        "llama-vscode.auto_memory_enabled": False,
        "llama-vscode.env_start_last_used": False,
    }
    try:
        files = {"fib.py": SOURCE, "notes.txt": NOTES}
        with code_server(tmp_path, VSIX, settings, files) as (url, work, env):
            # llama.vscode activates on plain text, JavaScript or TypeScript: open a text file first;
            # on its first start it opens an "Information" page, which would take the keys: close it
            result = drive(url, "fib.py", out, 10, env, status="llama", openFirst="notes.txt", closeTab="Information")
            saved = (work / "fib.py").read_text()
    finally:
        proxy.shutdown()
        gateway.terminate()
        gateway.wait(timeout=10)
    infills = [e for e in proxy.log if e["path"].startswith("/infill")]
    print(f"\nllama.vscode -> fimgate: {len(proxy.log)} requests, {len(infills)} to /infill")
    for e in proxy.log:
        print(_brief(e))
    print(f"keystroke -> ghost text ({result['withGhost']}/{result['trials']} shown): p50 {result['p50_ms']} ms")
    shown = result["shown"].replace("\xa0", " ")
    assert shown.strip(), "llama.vscode showed no ghost text"
    # the ghost text is one of fimgate's answers, and it came over llama.cpp's /infill contract: the
    # line it completes is a line some request's prompt and answer made (llama.vscode also shows a
    # cached answer less what was typed since: "fib" + "onacci(..." is shown after "fibo" as "nacci(...")
    lines = {
        e["request"].get("prompt", "") + e["answer"]["content"].split("\n")[0]
        for e in infills
        if e["status"] == 200 and isinstance(e["answer"], dict) and e["answer"].get("content")
    }
    assert "    return fibo" + shown.split("\n")[0] in lines, (shown, sorted(lines)[:5])
    assert all(e["status"] == 200 for e in infills), [e for e in infills if e["status"] != 200][:3]
    # its ring-buffer context reached fimgate with the typing requests (input_extra from notes.txt)
    assert any(e["request"].get("input_extra") for e in infills)
    # Tab put it in the file, and the file was saved
    assert f"return fibo{shown.split(chr(10))[0]}" in saved
