"""llama-server's `/infill` and `/props`, field by field, as llama.vscode and llama.vim use them.

Request fields honoured: input_prefix, input_suffix, prompt (the cursor line's text before the
cursor), input_extra (context chunks), n_predict (0: a warm-up), t_max_predict_ms (once this long
has passed since the first token and a line is complete, the answer is what is decoded by then),
n_indent (a suggestion ends before a line indented less), temperature, top_p, stop, stream,
response_fields (only those fields, "a/b" for nested ones, keyed by their path), filename (a
fimgate extension: sessions are per file). Accepted and ignored, with the reason:
  cache_prompt  fimgate always reuses what it can (that is what it is for)
  id_slot       sessions are per user and document, not per slot
  n_cmpl        one suggestion per request (llama.vscode takes one object as well as a list)
  samplers, top_k, t_max_prompt_ms  greedy by default; temperature and top_p are the sampling knobs;
                a prompt is never cut short (it is windowed instead)

A request without a file name is matched to the person's session by its text (EfimPlanner.
document_for); a warm-up that carries only input_extra (llama.vscode's ring buffer) runs in a
session of its own, so it never re-anchors or cancels the file being typed in.
"""

from __future__ import annotations

from fimgate.backend.base import Finished, SamplingParams
from fimgate.efim.planner import EditorState
from fimgate.efim.templates import ContextChunk
from fimgate.gateway.protocol import InfillRequest
from fimgate.gateway.service import Shape

CONTEXT_WARMUP = "context-warmup"  # the document id of input_extra-only warm-ups


def infill_request(body: InfillRequest, user: str) -> tuple[EditorState, SamplingParams, Shape]:
    n = 128 if body.n_predict < 0 else body.n_predict
    sampling = SamplingParams(
        max_tokens=n,
        temperature=body.temperature,
        top_p=body.top_p,
        stop=tuple(body.stop),
        max_predict_ms=body.t_max_predict_ms or None,
    )
    before = body.input_prefix + body.prompt
    context = tuple(ContextChunk(c.filename, c.text) for c in body.input_extra)
    if body.filename:
        document = body.filename
    elif n == 0 and not (before or body.input_suffix):
        document = CONTEXT_WARMUP
    else:
        document = ""  # the service finds the session by the text
    state = EditorState(
        user_id=user,
        document_id=document,
        text=before + body.input_suffix,
        cursor=len(before),
        path=body.filename or "",
        context=context,
    )
    return state, sampling, Shape(min_indent=body.n_indent or None)


def infill_response(text: str, final: Finished | None, done: bool, body: InfillRequest, model: str, n_ctx: int | None) -> dict:
    out = {"content": text, "stop": done, "model": model}
    if final is not None:
        u = final.usage
        prompt_ms = u.ttft_ms or 0.0
        predicted_ms = max(0.0, (u.total_ms or 0.0) - prompt_ms)
        out.update(
            {
                "tokens_predicted": u.completion_tokens,
                "tokens_evaluated": u.prompt_tokens,
                "tokens_cached": u.cached_tokens,
                "truncated": False,
                "stop_type": "eos" if u.finish_reason == "stop" else "limit",
                "generation_settings": {
                    "n_ctx": n_ctx,
                    "n_predict": body.n_predict,
                    "model": model,
                    "temperature": body.temperature,
                    "top_p": body.top_p,
                    "stop": body.stop,
                    "n_indent": body.n_indent,
                    "t_max_predict_ms": body.t_max_predict_ms,
                },
                "timings": {
                    "prompt_n": u.prefilled_tokens + u.recomputed_tokens,
                    "prompt_ms": prompt_ms,
                    "prompt_per_token_ms": _per(prompt_ms, u.prefilled_tokens + u.recomputed_tokens),
                    "prompt_per_second": _rate(u.prefilled_tokens + u.recomputed_tokens, prompt_ms),
                    "predicted_n": u.completion_tokens,
                    "predicted_ms": predicted_ms,
                    "predicted_per_token_ms": _per(predicted_ms, u.completion_tokens),
                    "predicted_per_second": _rate(u.completion_tokens, predicted_ms),
                },
                "fimgate": u.as_dict(),
            }
        )
    return _only(out, body.response_fields) if body.response_fields else out


def props(model: str, n_ctx: int | None) -> dict:
    return {
        "default_generation_settings": {"n_ctx": n_ctx, "params": {"n_predict": 128, "temperature": 0.0, "top_p": 1.0}},
        "total_slots": 1,
        "model_path": model,
        "build_info": "fimgate",
    }


def _only(out: dict, fields: list[str]) -> dict:
    """llama-server's response_fields: each "a/b" path that exists, keyed by the path."""
    picked = {}
    for path in fields:
        value, found = out, True
        for key in path.split("/"):
            if isinstance(value, dict) and key in value:
                value = value[key]
            else:
                found = False
                break
        if found:
            picked[path] = value
    return picked


def _per(ms: float, n: int) -> float | None:
    return ms / n if n else None


def _rate(n: int, ms: float) -> float | None:
    return 1000.0 * n / ms if n and ms > 0 else None
