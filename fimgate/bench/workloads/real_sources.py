"""Real source files per language for `fimgate bench shape` (and anything else that cuts holes
from code people wrote), made reproducibly from what this repository may read:

    python      flask (../shared/repos/flask-301.bundle, branch `linear`): src/
    typescript  llama.vscode 0.0.63 (../shared/clients): src/
    go          Debian bookworm's golang-github-spf13-cobra-dev: cobra's .go files
    rust        librust-regex-syntax-dev: regex-syntax 0.6's src/
    java        openjdk-17-source: the JDK's java.base java/util (from src.zip)
    c           libstb-dev: the stb single-file libraries (their implementations are in the .h files)
    cpp         nlohmann-json3-dev: nlohmann/json's headers

Debian packages are fetched with `apt-get download` (the registry this machine reaches), version
pinned; where bookworm has moved on from a pin, the version it has is taken and printed.

    python -m fimgate.bench.workloads.real_sources out/sources   # prints one folder per language
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared")

# language: (Debian package, pinned version, folder inside the package to keep)
DEBIAN = {
    "go": ("golang-github-spf13-cobra-dev", "1.6.1-1", "usr/share/gocode/src/github.com/spf13/cobra"),
    "rust": ("librust-regex-syntax-dev", "0.6.27-1", "usr/share/cargo/registry/regex-syntax-0.6.27/src"),
    "c": ("libstb-dev", "0.0~git20220908.8b5f1f3+ds-1", "usr/include/stb"),
    "cpp": ("nlohmann-json3-dev", "3.11.2-2", "usr/include/nlohmann"),
    "java": ("openjdk-17-source", "17.0.21.1+2-1~deb12u1", "usr/lib/jvm/openjdk-17/lib/src.zip"),
}
JAVA_PART = "java.base/java/util/"


def _run(cmd: list[str], cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def _download(package: str, version: str, into: str) -> str:
    """The .deb's path: the pinned version, else the one the registry has now (printed)."""
    done = _run(["apt-get", "download", f"{package}={version}"], cwd=into)
    if done.returncode != 0:
        print(f"{package} {version} is gone from the registry; taking its current version", file=sys.stderr)
        done = _run(["apt-get", "download", package], cwd=into)
        if done.returncode != 0:
            raise SystemExit(f"apt-get download {package} failed: {done.stderr.strip()}")
    debs = sorted(glob.glob(os.path.join(into, f"{package}_*.deb")))
    return debs[-1]


def make(out: str, shared: str = SHARED) -> dict[str, str]:
    """Fill `out` and return {language: folder}."""
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    folders = {}
    flask = os.path.join(out, "flask")
    if not os.path.isdir(flask):
        bundle = os.path.join(shared, "repos", "flask-301.bundle")
        if _run(["git", "clone", "-q", "-b", "linear", bundle, flask]).returncode != 0:
            raise SystemExit(f"cannot clone {bundle}")
    folders["python"] = os.path.join(flask, "src")
    vscode = os.path.join(out, "llama.vscode")
    if not os.path.isdir(vscode):
        with tarfile.open(os.path.join(shared, "clients", "llama.vscode-0.0.63.tar.gz")) as tar:
            tar.extractall(out, filter="data")
    folders["typescript"] = os.path.join(vscode, "src")
    debs = os.path.join(out, "debs")
    os.makedirs(debs, exist_ok=True)
    for language, (package, version, part) in DEBIAN.items():
        folder = os.path.join(out, language)
        if not os.path.isdir(folder):
            unpacked = os.path.join(debs, package)
            if _run(["dpkg-deb", "-x", _download(package, version, debs), unpacked]).returncode != 0:
                raise SystemExit(f"cannot unpack {package}")
            if part.endswith(".zip"):
                with zipfile.ZipFile(os.path.join(unpacked, part)) as z:
                    for name in z.namelist():
                        if name.startswith(JAVA_PART) and name.count("/") == JAVA_PART.count("/") and name.endswith(".java"):
                            target = os.path.join(folder, os.path.basename(name))
                            os.makedirs(folder, exist_ok=True)
                            with open(target, "wb") as f:
                                f.write(z.read(name))
            else:
                shutil.copytree(os.path.join(unpacked, part), folder)
        folders[language] = folder
    return folders


if __name__ == "__main__":
    for language, folder in make(sys.argv[1] if len(sys.argv) > 1 else "out/sources").items():
        print(f"{language}\t{folder}")
