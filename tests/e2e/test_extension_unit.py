"""The VS Code extension's own unit tests (mocha, vscode-extension/test), run where the e2e
toolchain is installed (tests/e2e/vscode/setup.sh; CI sets FIMGATE_E2E_VSCODE=1 so they must run)."""

import os
import subprocess

import pytest

from fimgate.bench.editor.vscode_rig import NODE_BIN, ROOT

EXT = os.path.join(ROOT, "vscode-extension")
ready = os.path.isdir(os.path.join(EXT, "node_modules")) and os.path.exists(os.path.join(NODE_BIN, "node"))
if not ready and os.environ.get("FIMGATE_E2E_VSCODE") != "1":
    pytest.skip("run tests/e2e/vscode/setup.sh first (installs the extension's dev dependencies)", allow_module_level=True)


def test_extension_unit_tests_pass():
    env = {**os.environ, "PATH": NODE_BIN + os.pathsep + os.environ["PATH"]}
    r = subprocess.run(["npm", "test", "--silent"], cwd=EXT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passing" in r.stdout and " failing" not in r.stdout
