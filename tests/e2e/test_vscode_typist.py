"""The accepting typist in real VS Code (code-server) with the packaged extension on `fimgate serve`:
the first keys of flask-60 typed with their real gaps, right suggestions taken with Tab or
accept-word. The person takes only what they would have typed, so the saved files must be exactly
what the trace typed, with fewer keys pressed.

Skipped without the toolchain unless FIMGATE_E2E_VSCODE=1 (CI sets it).
"""

import os

import pytest

from fimgate.bench.common.checkout import SHARED
from fimgate.bench.common.served import start_serve, stop
from fimgate.bench.editor.vscode import clients
from fimgate.bench.editor.vscode_rig import FIMGATE_VSIX, TOOLCHAIN
from fimgate.bench.editor.vscode_typist import type_accepting, typed
from fimgate.bench.typist.script import steps_of
from fimgate.bench.workloads.trace import read_events

ready = all(os.path.exists(p) for p in (*TOOLCHAIN, FIMGATE_VSIX))
if not ready and os.environ.get("FIMGATE_E2E_VSCODE") != "1":
    pytest.skip("run tests/e2e/vscode/setup.sh first (real VS Code toolchain)", allow_module_level=True)


def test_the_accepting_typist_saves_keys_and_the_files_are_what_the_trace_typed(tmp_path):
    assert ready, "the VS Code e2e toolchain is missing: run tests/e2e/vscode/setup.sh"
    steps = steps_of(read_events(str(SHARED / "traces" / "flask-60.jsonl")), 60)
    proc, url = start_serve()
    try:
        r = type_accepting(clients(url)["fimgate"], steps, 300, str(tmp_path))
    finally:
        stop(proc)
    print(f"\naccepting typist, 60 keys: { ({k: v for k, v in r.items() if k != 'taken'}) }")
    assert r["faithful"], r["mismatches"]
    assert r["keys_typed"] + r["chars_not_typed"] == r["keys_in_trace"]
    assert r["chars_not_typed"] > 0 and sum(r["accepts"].values()) >= 1
    truth = "".join(typed(steps).values())
    for _, text in r["taken"]:
        assert text in truth
