"""llama.vscode's completion request, and the prompt llama-server builds from it.

What llama.vscode 0.0.63 sends on an automatic trigger (src/completion.ts, src/llama-server.ts):

    input_prefix      the 256 lines above the cursor line, each ending in "\\n"
    prompt            the cursor line up to the cursor ("" when that is only spaces or tabs)
    input_suffix      the rest of the cursor line and the 64 lines below, each ending in "\\n"
    n_indent          the cursor line's indentation
    n_predict 128, t_max_predict_ms 500 (package.json defaults)

It sends nothing when more than 8 characters follow the cursor on its line (max_line_suffix).
It keeps past suggestions and shows one again without a request when the person types its
first characters (in the replay, the service's type-through stands for that cache).

llama-server builds the prompt (tools/server format_infill; n_batch 1024, as llama.vscode's
README starts it with -b 1024): each part tokenized on its own, the prefix's last 3/4 n_batch
tokens, the suffix's first n_batch/4 - 2 - len(prompt) tokens:

    [context chunks] <PRE> prefix prompt <SUF> suffix <MID>

so every key typed changes the prompt from the cursor line on. Where the vocabulary has a
repository-name and a file-separator token (Qwen2.5-Coder), the context is the repository-level
layout: `<|repo_name|>myproject\n`, `<|file_sep|>NAME\n TEXT` per chunk, `<|file_sep|>filename\n`;
else chunks follow a "--- snippet ---" line. For a family without FIM tokens the file separator
marks the parts (as fimgate/bench/replay/baseline.py's PSM layout does).
`tests/integration/test_llama_server_peer.py` checks the length against the real server's.
"""

from __future__ import annotations

from fimgate.backend.base import SamplingParams, Tokenizer
from fimgate.efim.templates import FimTemplate
from fimgate.gateway.protocol import InfillChunk, InfillRequest

PREFIX_LINES = 256
SUFFIX_LINES = 64
N_PREDICT = 128
T_MAX_PREDICT_MS = 500
MAX_LINE_SUFFIX = 8
N_BATCH = 1024
N_CTX = 8192  # --ctx-size 0: the model's own (SmolLM2's 8,192; Qwen2.5-Coder's 32,768: more context chunks fit)
SNIPPET = "\n\n--- snippet ---\n\n"  # llama-server's chunk separator for a vocabulary without FIM_SEP
FIM_REP = ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>")
FIM_SEP = ("<|file_sep|>",)


def request_body(text: str, cursor: int, context=()) -> InfillRequest | None:
    """The /infill body llama.vscode sends for the cursor, or None where it sends nothing."""
    lines = text.split("\n")
    row = text.count("\n", 0, cursor)
    line_start = text.rfind("\n", 0, cursor) + 1
    line = lines[row]
    before, after = text[line_start:cursor], line[cursor - line_start :]
    if len(after) > MAX_LINE_SUFFIX:
        return None
    above = lines[max(0, row - PREFIX_LINES) : row]
    below = lines[row + 1 : min(len(lines) - 1, row + SUFFIX_LINES) + 1]
    return InfillRequest(
        input_prefix="\n".join(above) + "\n",
        prompt="" if not before.strip(" \t") else before,
        input_suffix=after + "\n" + "\n".join(below) + "\n",
        input_extra=[InfillChunk(filename=c.path, text=c.text) for c in context],
        n_predict=N_PREDICT,
        t_max_predict_ms=T_MAX_PREDICT_MS,
        n_indent=len(line) - len(line.lstrip()),
    )


def sampling(body: InfillRequest) -> SamplingParams:
    """What the request asks of decoding (greedy: the replay compares times, and fimgate's
    /infill decodes llama.vscode's top_k/top_p request greedily too)."""
    return SamplingParams(max_tokens=body.n_predict, max_predict_ms=body.t_max_predict_ms)


def server_prompt(tok: Tokenizer, template: FimTemplate, body: InfillRequest, n_batch: int = N_BATCH) -> tuple[int, ...]:
    pre, suf, mid = (
        (template.prefix, template.suffix, template.middle)
        if template.prefix
        else (template.file_sep, template.file_sep, template.file_sep)
    )
    prefix, prompt, suffix = tok.encode(body.input_prefix), tok.encode(body.prompt), tok.encode(body.input_suffix)
    prefix = prefix[len(prefix) - min(len(prefix), 3 * (n_batch // 4)) :]
    suffix = suffix[: min(len(suffix), max(0, n_batch // 4 - (2 + len(prompt))))]
    # the repo-level layout, with the tokens llama.cpp's vocabulary recognizes (src/llama-vocab.cpp)
    rep = template.repo_name if template.repo_name in FIM_REP else None
    sep = template.file_sep if template.file_sep in FIM_SEP else None
    extra = [tok.token_id(rep)] + tok.encode("myproject\n") if rep else []
    for c in body.input_extra:
        if sep:
            extra += [tok.token_id(sep)] + tok.encode((c.filename or "tmp") + "\n") + tok.encode(c.text)
        else:
            extra += tok.encode(SNIPPET) + tok.encode(c.text)
    if sep:  # the file being completed: llama-server names it "filename"
        extra += [tok.token_id(sep)] + tok.encode("filename\n")
    extra = extra[len(extra) - min(len(extra), max(0, N_CTX - n_batch - 2 * body.n_predict)) :]
    return tuple(extra + [tok.token_id(pre)] + prefix + prompt + [tok.token_id(suf)] + suffix + [tok.token_id(mid)])
