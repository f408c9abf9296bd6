"""Every command of the README's "Use it" block, run as written (the port aside) against a real
`fimgate serve`: what a new user pastes works. (`make serve` and `make test`, the first block, are
what CI itself runs.)"""

import json
import os
import re
import subprocess
import sys

import pytest

from fimgate.bench.common.served import start_serve
from tests.conftest import ROOT


def _use_it_block() -> list[str]:
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = readme.split("## Use it", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def url():
    proc, base = start_serve()
    yield base
    proc.terminate()
    proc.wait(timeout=10)


def test_the_use_it_block_runs_as_written(url, tmp_path):
    lines = _use_it_block()
    assert lines[0].startswith(".venv/bin/fimgate serve")  # started by the fixture, on a free port
    fimgate = os.path.join(os.path.dirname(sys.executable), "fimgate")
    port = url.rsplit(":", 1)[1]
    ran = 0
    for line in lines[1:]:
        command = line.replace("localhost:8418", f"127.0.0.1:{port}").replace(".venv/bin/fimgate", fimgate)
        r = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, (line, r.stderr)
        if line.startswith("curl"):
            out = json.loads(r.stdout)
            text = out["choices"][0]["text"] if "choices" in out else out["content"]
            assert text.strip(), (line, out)
        elif " complete " in line:
            out = json.loads(r.stdout)
            assert out["completion"].strip() and "print(add" not in out["completion"]
        elif line.endswith("models"):
            assert "qwen2.5-coder-0.5b (default)" in r.stdout
        ran += 1
    assert ran == len(lines) - 1 >= 5
