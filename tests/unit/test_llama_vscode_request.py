"""llama.vscode's request and llama-server's prompt for it (fimgate/bench/peers/llama_vscode.py), the
peer's side of `bench replay --peer-strategies llama.vscode`."""

from fimgate.bench.peers import llama_vscode
from fimgate.efim.templates import TEMPLATES

TEXT = "import os\n\ndef f(x):\n    if x:\n        return os.path.join(x, 'a')\n    return None\n"


def test_the_fields_llama_vscode_sends():
    cursor = TEXT.index("os.path")  # inside the `return` line, with more than 8 characters after
    assert llama_vscode.request_body(TEXT, cursor) is None  # max_line_suffix: no automatic request
    cursor = TEXT.index("(x, 'a')")  # 8 characters after the cursor: asked
    body = llama_vscode.request_body(TEXT, cursor)
    assert body.input_prefix == "import os\n\ndef f(x):\n    if x:\n"
    assert body.prompt == "        return os.path.join"
    assert body.input_suffix == "(x, 'a')\n    return None\n\n"
    assert (body.n_indent, body.n_predict, body.t_max_predict_ms) == (8, 128, 500)
    blank = llama_vscode.request_body(TEXT + "    ", len(TEXT) + 4)
    assert blank.prompt == "" and blank.n_indent == 4  # a line of spaces only is sent as ""


def test_llama_server_puts_the_cursor_line_before_the_suffix_and_cuts_the_suffix_to_fit(smol_tok):
    template = TEMPLATES["smollm2"]
    long_suffix = TEXT + "\n".join(f"x{i} = {i}" for i in range(60)) + "\n"
    body = llama_vscode.request_body(long_suffix, TEXT.index("(x, 'a')"))
    ids = llama_vscode.server_prompt(smol_tok, template, body, n_batch=256)
    prompt = smol_tok.encode(body.prompt)
    sep = [i for i, t in enumerate(ids) if t == ids[0]]  # <PRE> <SUF> <MID> (or the file separator thrice)
    assert len(sep) == 3 and sep[0] == 0 and sep[2] == len(ids) - 1
    assert list(ids[sep[1] - len(prompt) : sep[1]]) == prompt  # the cursor line ends the prefix part
    assert sep[2] - sep[1] - 1 == 256 // 4 - 2 - len(prompt)  # the suffix: n_batch/4 - 2 - len(prompt)
