"""Models by name: parts assembled once into the cache, checked against the pinned SHA-256 and
the GGUF metadata before use; a missing or altered part is one clear error."""

import hashlib
import os
import shutil
import struct

import pytest

from fimgate.backend.model import registry
from fimgate.backend.model.registry import (
    ModelIntegrityError,
    ModelNotInstalledError,
    ModelSpec,
    assemble_model,
    path_of,
    resolve_model,
)


def _gguf(arch: str, name: str) -> bytes:
    """A minimal GGUF file: two string fields, no tensors."""

    def s(text: str) -> bytes:
        b = text.encode()
        return struct.pack("<Q", len(b)) + b

    body = b"".join(s(k) + struct.pack("<I", 8) + s(v) for k, v in (("general.architecture", arch), ("general.name", name)))
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + body + b"\0" * 64


def _install_parts(root, prefix: str, data: bytes, count: int) -> None:
    cut = [len(data) * i // count for i in range(count + 1)]
    for i in range(1, count + 1):
        pkg = root / f"{prefix}{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("raise ImportError('parts are found, never imported')\n")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data[cut[i - 1] : cut[i]])


@pytest.fixture
def parts(tmp_path, monkeypatch):
    data = _gguf("qwen2", "Tiny Coder")
    site = tmp_path / "site"
    _install_parts(site, "tinyparts_", data, 3)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("FIMGATE_MODEL_DIR", str(tmp_path / "models"))
    spec = ModelSpec(
        name="tiny-coder",
        title="Tiny",
        quantization="none",
        licence="MIT",
        template="qwen2.5-coder",
        install="pip install tiny",
        packages=tuple(f"tinyparts-{i}" for i in range(1, 4)),
        version="1.0",
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        architecture="qwen2",
        gguf_name="Tiny Coder",
    )
    monkeypatch.setitem(registry.MODELS, spec.name, spec)
    return spec, data, site


def test_parts_are_assembled_once_and_verified(parts, capsys):
    spec, data, _ = parts
    assert path_of(spec, assemble=False) is None  # installed, not assembled yet
    path = resolve_model("tiny-coder")
    assert open(path, "rb").read() == data
    assert "100%" in capsys.readouterr().err  # the progress bar
    mtime = os.stat(path).st_mtime_ns
    assert resolve_model("tiny-coder") == path and os.stat(path).st_mtime_ns == mtime  # not again


def test_an_altered_part_is_refused_and_nothing_is_left_behind(parts):
    spec, data, site = parts
    part = site / "tinyparts_2" / "data" / "part02.bin"
    part.write_bytes(bytes([part.read_bytes()[0] ^ 1]) + part.read_bytes()[1:])
    with pytest.raises(ModelIntegrityError, match="SHA-256.*reinstall: pip install tiny"):
        resolve_model("tiny-coder")
    assert not any(p.is_file() for p in (registry.model_dir()).rglob("*"))


def test_a_part_of_another_size_is_refused(parts):
    spec, data, site = parts
    (site / "tinyparts_3" / "data" / "part03.bin").write_bytes(b"x")
    with pytest.raises(ModelIntegrityError, match="bytes"):
        resolve_model("tiny-coder")


def test_a_file_that_is_not_the_model_it_claims_is_refused(parts, monkeypatch):
    spec, data, _ = parts
    monkeypatch.setitem(registry.MODELS, spec.name, spec.__class__(**{**spec.__dict__, "gguf_name": "Other"}))
    with pytest.raises(ModelIntegrityError, match="general.name"):
        assemble_model(registry.MODELS[spec.name], progress=False)


def test_a_missing_package_names_the_install_command(parts):
    _, _, site = parts
    shutil.rmtree(site / "tinyparts_2")
    with pytest.raises(ModelNotInstalledError, match="tinyparts-2==1.0.*pip install tiny"):
        resolve_model("tiny-coder")


def test_a_replaced_assembled_file_is_checked_again(parts):
    spec, data, _ = parts
    path = resolve_model("tiny-coder")
    with open(path, "r+b") as f:  # someone wrote over the cached file: the stamp no longer matches
        f.seek(len(data) - 1)
        f.write(b"!")
    assert open(resolve_model("tiny-coder"), "rb").read() == data


def test_names_paths_and_unknown_names():
    assert resolve_model("/some/where/model.gguf") == "/some/where/model.gguf"
    with pytest.raises(ModelNotInstalledError, match="unknown model 'qwen-coder-9b'.*qwen2.5-coder-0.5b"):
        resolve_model("qwen-coder-9b")
    assert registry.ALIASES["bundled"] == "smollm2-135m" and registry.DEFAULT_MODEL == "qwen2.5-coder-0.5b"
