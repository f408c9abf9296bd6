"""Real VS Code for the editor e2e tests and `fimgate bench editor`: code-server 4.139.1 with an
extension installed from its .vsix, user settings, a workspace folder, and the playwright drivers
(tests/e2e/vscode/drive.js, replay.js). Needs a checkout where `make e2e-setup`
(tests/e2e/vscode/setup.sh) has run; CI runs it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time

import httpx

from fimgate.bench.common.served import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HERE = os.path.join(ROOT, "tests", "e2e", "vscode")
FIMGATE_VSIX = os.path.join(ROOT, "vscode-extension", "fimgate.vsix")
LLAMA_VSCODE_VSIX = os.path.join(HERE, "build", "llama-vscode.vsix")
NODE_BIN = os.path.join(HERE, "node24", "node_modules", "node", "bin")
CODE_SERVER = os.path.join(HERE, "node_modules", ".bin", "code-server")
TOOLCHAIN = (CODE_SERVER, os.path.join(NODE_BIN, "node"), "/usr/bin/chromium")
QUIET_SETTINGS = {
    "editor.inlineSuggest.enabled": True,
    "workbench.startupEditor": "none",
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "editor.quickSuggestions": {"other": False, "comments": False, "strings": False},
    "editor.suggestOnTriggerCharacters": False,
    "editor.cursorBlinking": "solid",  # a blinking cursor redraws the page twice a second
    "chat.disableAIFeatures": True,  # VS Code's own chat view would open beside the editor
    "workbench.secondarySideBar.defaultVisibility": "hidden",
}


def _wait(url: str, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not come up")


@contextlib.contextmanager
def code_server(tmp_path, vsix: str, settings: dict, files: dict[str, str]):
    """Yield (browser URL of the workspace, workspace path, env for node) with `vsix` installed."""
    env = {**os.environ, "PATH": NODE_BIN + os.pathsep + os.environ["PATH"], "HOME": str(tmp_path)}
    work = tmp_path / "work"
    work.mkdir()
    for name, text in files.items():
        (work / name).write_text(text)
    user = tmp_path / "user-data" / "User"
    user.mkdir(parents=True)
    (user / "settings.json").write_text(json.dumps({**QUIET_SETTINGS, **settings}))
    ext = tmp_path / "extensions"
    common = ["--user-data-dir", str(tmp_path / "user-data"), "--extensions-dir", str(ext)]
    subprocess.run([CODE_SERVER, *common, "--install-extension", vsix], env=env, check=True, capture_output=True, timeout=300)
    port = free_port()
    code = subprocess.Popen(
        [CODE_SERVER, "--auth", "none", "--bind-addr", f"127.0.0.1:{port}", *common]
        + ["--disable-telemetry", "--disable-update-check", str(work)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(f"http://127.0.0.1:{port}/healthz")
        yield f"http://127.0.0.1:{port}/?folder={work}", work, env
    finally:
        code.terminate()
        try:
            code.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code.kill()
        shutil.rmtree(ext, ignore_errors=True)


def drive(url: str, file_name: str, out: str, trials: int, env: dict, **options) -> dict:
    """Run vscode/drive.js: type in `file_name`, measure key -> ghost text, Tab, save. Its JSON result."""
    r = subprocess.run(
        ["node", os.path.join(HERE, "drive.js"), url, file_name, out, str(trials), json.dumps(options)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["ok"], result.get("error")
    with open(os.path.join(out, "latency.json"), "w") as f:
        json.dump(result, f, indent=2)
    return result
