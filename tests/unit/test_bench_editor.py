"""fimgate bench editor's pure parts: the steps typed into VS Code from a trace, and what a key
counts as (shown in time, useful)."""

import pytest

from fimgate.bench.editor.vscode import summarize, trace_slice


def _events():
    return [
        {"type": "commit", "t": 0},
        {"type": "open", "file": "a.py", "text": "x = 1\ny = 2\n", "t": 0},
        {"type": "move", "file": "a.py", "offset": 6, "t": 100},
        {"type": "delete", "file": "a.py", "offset": 6, "length": 5, "t": 200},
        {"type": "insert", "file": "a.py", "offset": 6, "text": "z", "t": 300},
        {"type": "insert", "file": "a.py", "offset": 7, "text": " = 3", "auto": True, "t": 5000},
        {"type": "insert", "file": "a.py", "offset": 11, "text": "\n", "t": 5100},
        {"type": "insert", "file": "a.py", "offset": 12, "text": "w", "t": 5200},
    ]


def test_the_slice_types_the_trace_and_knows_the_final_text():
    sl = trace_slice(_events(), keys=2)
    ops = [s["op"] for s in sl.steps]
    assert ops == ["open", "move", "delete", "key", "paste", "key", "save"]
    assert sl.steps[1] == {"op": "move", "line": 2, "col": 1, "wait_ms": 100}  # 1-based, for VS Code's Go to Line
    assert sl.steps[2] == {"op": "delete", "line": 2, "col": 1, "length": 5, "wait_ms": 100}  # the person's pause after it
    assert sl.steps[0]["wait_ms"] == 100
    assert sl.steps[3]["wait_ms"] == 2000  # a long pause is cut to the window a key is measured in
    assert sl.files == {"a.py": "x = 1\ny = 2\n"}
    assert sl.final == {"a.py": "x = 1\nz = 3\n\n"}  # typing stopped after the second key
    assert sl.typed_next == [" = 3\nw", "w"]  # what the person typed after each key (the trace goes on)


def test_an_auto_indent_with_a_key_is_part_of_that_key():
    # VS Code indents after Enter in the same edit and asks for a suggestion there: the key's window
    # runs to the person's next key, and what they typed next starts after the indentation
    events = [
        {"type": "open", "file": "a.py", "text": "if x:\n", "t": 0},
        {"type": "move", "file": "a.py", "offset": 5, "t": 100},
        {"type": "insert", "file": "a.py", "offset": 5, "text": "\n", "t": 300},
        {"type": "insert", "file": "a.py", "offset": 6, "text": "    ", "auto": True, "t": 300},
        {"type": "insert", "file": "a.py", "offset": 10, "text": "y", "t": 480},
    ]
    sl = trace_slice(events, keys=2)
    assert [s["op"] for s in sl.steps] == ["open", "move", "key", "key", "save"]
    assert sl.steps[2] == {"op": "key", "text": "\n", "then": "    ", "wait_ms": 180}
    assert sl.typed_next[0] == "y"
    assert sl.final == {"a.py": "if x:\n    y\n"}


def test_a_key_counts_as_shown_only_before_the_next_key_and_useful_only_if_typed_next():
    keys = [
        {"shown_ms": 120, "window_ms": 200, "text": "ute(1)"},  # shown in time, and typed next
        {"shown_ms": 250, "window_ms": 200, "text": "ute(1)"},  # drawn after the next key: never seen
        {"shown_ms": None, "window_ms": 200, "text": ""},
        {"shown_ms": 10, "window_ms": 200, "text": "foo\nbar"},  # first line right, the rest not
    ]
    r = summarize(keys, ["ute(1)\n", "ute(1)", "x", "foo\nbaz"])
    assert [k["shown_ms"] for k in r["per_key"]] == [120, None, None, 10]
    assert r["shown_share"] == 0.5
    assert r["useful_share"] == 0.25 and r["useful_line_share"] == 0.5
    assert r["p50_ms"] == float("inf")  # half the keys never showed anything: they sort last
    assert r["shown_p50_ms"] == 120
    assert r["word_accept_share"] == 0.5 and r["word_accept_chars"] == len("ute(1)") + len("foo\n")


def test_accepting_by_word_takes_the_right_words_and_stops_inside_none():
    from fimgate.bench.editor.vscode import word_accept_chars

    assert word_accept_chars("self.request.view_args", "self.request.url") == len("self.request.")
    assert word_accept_chars("request()", "request_ctx") == len("request")  # a whole word of the suggestion, typed on
    assert word_accept_chars("requests", "request_ctx") == 0  # the suggestion's word is wrong: nothing to take
    assert word_accept_chars("lf", "lf.request") == 2  # the whole suggestion, typed on
    assert word_accept_chars("x = 1", "y = 1") == 0


def test_a_package_older_than_its_sources_is_refused(tmp_path):
    import os

    from fimgate.bench.editor.vscode import stale_vsix

    (tmp_path / "src").mkdir()
    src, vsix = tmp_path / "src" / "extension.ts", tmp_path / "fimgate.vsix"
    src.write_text("x")
    vsix.write_text("zip")
    os.utime(src, (1000, 1000))
    os.utime(vsix, (2000, 2000))
    assert stale_vsix(str(vsix)) is None
    os.utime(src, (3000, 3000))  # edited after packaging: the bench would measure old code
    assert stale_vsix(str(vsix)) == str(src)


def test_a_client_names_the_server_it_runs_against():
    from fimgate.bench.editor.vscode import clients, parse_client

    assert parse_client("fimgate") == ("fimgate", "fimgate")
    assert parse_client("llama.vscode@llama-server") == ("llama.vscode", "llama-server")
    assert parse_client("llama.vscode-1@fimgate") == ("llama.vscode-1", "fimgate")
    with pytest.raises(ValueError, match="only llama.vscode"):
        parse_client("fimgate@llama-server")  # fimgate's extension speaks fimgate's API
    with pytest.raises(ValueError, match="unknown server"):
        parse_client("llama.vscode@ollama")
    one = clients("http://x")["llama.vscode-1"].settings
    assert one["llama-vscode.max_parallel_completions"] == 1 and one["llama-vscode.endpoint"] == "http://x"
    assert "llama-vscode.max_parallel_completions" not in clients("http://x")["llama.vscode"].settings  # its default, 3
