"""A one-token step on the default model: torch layers against one C call (fimgate/kernels/llama_step.c).

    python -m fimgate.bench.micro.llama_step [--dtype int8,float32] [--context 32,840,2800] [--repeats 15] [--rows 2,4,8,16]

For each precision the model is loaded once, a real prompt of the largest context is prefilled,
and steps at each context length alternate between the two paths (kernel on, kernel off), so
both see the same machine state; medians in ms, the model's forward called directly (greedy:
the screened head, as a keystroke's first pick without a healing constraint takes it).

`--rows`: a key's prompt of a few tokens after the smallest context (an Enter and its indent, a
re-anchor's changed line), through the torch layers (`forward`) against the C step's batch in one
call (`forward_rows`, what the engine runs for a key's prefill of up to AT_ONCE_TOKENS), each
with the last token's head (the default model's quantized weights: `--dtype auto`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from fimgate.backend.embedded.engine import EmbeddedEngine, EngineConfig
from fimgate.backend.model.llama import KVBuffer
from fimgate.backend.model.registry import resolve_model
from fimgate.bench.engine.speed import _source_tokens
from fimgate.kernels.llama_step import KERNEL, kernel_available


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="int8,float32")
    ap.add_argument("--context", default="32,840,2800")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--rows", default="")
    a = ap.parse_args()
    contexts = [int(c) for c in a.context.split(",")]
    out = {"threads": torch.get_num_threads(), "kernel_built": kernel_available(), "ms_per_step": {}}
    for dtype in a.dtype.split(","):
        engine = EmbeddedEngine.from_path(resolve_model(None), EngineConfig(dtype=dtype))
        model = engine.model
        extra = max(int(r) for r in a.rows.split(",")) if a.rows else 0
        ids = _source_tokens(engine.tokenizer, max(contexts) + 1 + extra)
        kv = KVBuffer.empty(model.cfg, max(contexts) + 8 + extra)
        model.forward(torch.tensor(ids[: max(contexts)]), torch.arange(max(contexts)), kv)
        rows = {}
        for n in contexts:
            times = {"torch": [], "c": []}
            for _ in range(a.repeats):
                for name in ("c", "torch") if out["kernel_built"] else ("torch",):
                    KERNEL.set_enabled(name == "c")
                    t0 = time.perf_counter()
                    model.forward(torch.tensor([ids[n]]), torch.tensor([n]), kv, argmax_only=True)
                    times[name].append((time.perf_counter() - t0) * 1000)
            KERNEL.set_enabled(True)
            rows[n] = {name: round(statistics.median(t), 2) for name, t in times.items() if t}
        out["ms_per_step"][dtype] = rows
        if a.rows:
            out.setdefault("ms_per_prompt_rows", {})[dtype] = _prompt_rows(model, kv, ids, min(contexts), a.rows, a.repeats)
    print(json.dumps(out, indent=1))


def _prompt_rows(model, kv, ids: list[int], start: int, rows: str, repeats: int) -> dict:
    """{rows: {"torch": ms, "c": ms}}: `rows` tokens at positions start.. through either path."""
    out = {}
    for n in (int(r) for r in rows.split(",")):
        toks, pos = ids[start : start + n], list(range(start, start + n))
        times = {"torch": [], "c": []}
        for _ in range(repeats):
            for name in ("c", "torch"):
                t0 = time.perf_counter()
                if name == "c":
                    model.forward_rows(toks, pos, kv, argmax_only=True)
                else:
                    model.forward(torch.tensor(toks), torch.tensor(pos), kv, argmax_only=True)
                times[name].append((time.perf_counter() - t0) * 1000)
        out[n] = {name: round(statistics.median(t), 1) for name, t in times.items()}
    return out


if __name__ == "__main__":
    main()
