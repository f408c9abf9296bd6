"""fimgate lsp's context from other open documents, and the secret patterns it shares with the
VS Code extension."""

import re
from pathlib import Path

from fimgate.lsp.context import SECRET_PATTERNS, Touched, chunk_lines, is_secret
from fimgate.lsp.settings import LspSettings


def test_secret_patterns_match_the_extensions_list():
    ts = (Path(__file__).parents[2] / "vscode-extension" / "src" / "logic.ts").read_text()
    listed = re.search(r"SECRET_PATTERNS = \[(.*?)\];", ts, re.S).group(1)
    assert tuple(re.findall(r'"([^"]+)"', listed)) == SECRET_PATTERNS


def test_secret_files_are_recognised_and_code_is_not():
    for p in [
        "file:///w/.env",
        "file:///w/.env.production",
        "/w/certs/server.pem",
        "file:///home/u/.ssh/id_rsa",
        "file:///home/u/.aws/credentials",
        "file:///w/client_secret.json",
        "file:///w/My%20Credentials.txt",
        "C:\\w\\.npmrc",
    ]:
        assert is_secret(p), p
    for p in ["file:///w/app.py", "file:///w/environment.ts", "file:///w/tokenizer.py", "file:///w/keys.py"]:
        assert not is_secret(p), p
    assert is_secret("file:///w/vendor/x/a.py", ("**/vendor/**",)) and not is_secret("file:///w/src/a.py", ("**/vendor/**",))


def test_chunks_of_other_documents_oldest_touched_first_within_budget():
    docs = {f"file:///w/{n}.py": "\n".join(f"{n} line {i}" for i in range(100)) for n in ("a", "b", "c")}
    docs["file:///w/.env"] = "KEY=abc"
    t = Touched()
    t.touch("file:///w/a.py", 50)
    t.touch("file:///w/.env", 0)
    t.touch("file:///w/b.py", 3)
    t.touch("file:///w/c.py", 0)  # the current document: its own text is sent anyway
    chunks = t.chunks("file:///w/c.py", docs, 10_000)
    assert [c.path for c in chunks] == ["a.py", "b.py"]
    assert chunks[0].text.startswith("a line 34\n") and chunks[0].text.endswith("a line 66")
    assert chunks[1].text.startswith("b line 0\n")
    t.touch("file:///w/a.py", 51)  # editing a.py again makes it the newest
    assert [c.path for c in t.chunks("file:///w/c.py", docs, 10_000)] == ["b.py", "a.py"]
    one = len(chunks[0].text)
    assert [c.path for c in t.chunks("file:///w/c.py", docs, one + 10)] == ["a.py"]  # the newest that fit
    t.forget("file:///w/a.py")
    assert [c.path for c in t.chunks("file:///w/c.py", docs, 10_000)] == ["b.py"]
    assert t.chunks("file:///w/c.py", docs, 10_000, exclude=("b.py",)) == ()
    assert chunk_lines(2, 10) == (0, 9) and chunk_lines(50, 100) == (34, 66)


def test_context_settings_from_the_client():
    s = LspSettings().update({"fimgate": {"contextChars": 0, "contextExclude": ["**/gen/**"]}})
    assert s.context_chars == 0 and s.context_exclude == ("**/gen/**",)
    assert LspSettings().update({"contextExclude": "oops"}).context_exclude == ()
