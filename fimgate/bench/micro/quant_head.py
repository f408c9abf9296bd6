"""The quantized output head, three ways, against the fp32-dequantized head on real hidden states.

    python -m fimgate.bench.micro.quant_head [--model NAME] [--steps 300] [--repeats 21]

The default model's last hidden states over `--steps` one-token steps of a real file (flask's
ctx.py from ../shared's trace, else this repository's own source), then for each way of
computing the head: how often its argmax is the fp32 head's, the largest difference in the top
probability, and the median milliseconds for one token's head:

    8-bit             every row with 8-bit activations (one pass)
    8-bit + refined   that, then the REFINE_TOP highest rows again in fp32 (what the engine runs)
    residual          ~16-bit activations: x as two 8-bit rows in the same pass (before 2026-12-05)

and for a healing constraint (the tokens that begin with a fragment typed, e.g. "se"), the two ways
of reading only the allowed rows: the whole head's 8-bit pass then the allowed rows' best
REFINE_TOP in fp32, against the allowed rows alone in fp32 from their dequantized weights (what
the engine runs up to EXACT_ROWS of them): milliseconds, and how often the pick among the
allowed is the fp32 head's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from fimgate.backend.embedded.engine import EmbeddedEngine
from fimgate.backend.model import llama
from fimgate.backend.model.llama import KVBuffer
from fimgate.backend.model.quant_linear import EXACT_ROWS, REFINE_TOP, QuantWeight, screen_copy
from fimgate.backend.model.registry import resolve_model
from fimgate.bench.common.checkout import SHARED
from fimgate.cli import build_parser
from fimgate.flags import engine_config
from fimgate.kernels.quant_gemv import dequantize, quant_linear

TRACE = SHARED / "traces" / "flask-60.jsonl"


def _source() -> str:
    if TRACE.exists():
        with open(TRACE) as f:
            for line in f:
                ev = json.loads(line)
                if ev.get("type") == "open":
                    return ev["text"]
    with open(llama.__file__) as f:
        return f.read()


def hidden_states(engine: EmbeddedEngine, steps: int) -> torch.Tensor:
    """(steps, hidden): what the head was given at each of `steps` one-token steps after a prompt."""
    model = engine.model
    ids = engine.tokenizer.encode(_source())
    start = min(512, max(1, len(ids) - steps))
    kv = KVBuffer.empty(model.cfg, start + steps + 8)
    model.forward(torch.tensor(ids[:start]), torch.arange(start), kv)
    seen: list[torch.Tensor] = []
    head = model.lm_head

    class Recorder:
        shape = head.shape

        def __call__(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(x.detach().reshape(-1, head.shape[1]).clone())
            return head(x)

    real = llama.linear
    llama.linear = lambda x, w, bias=None: w(x) if isinstance(w, Recorder) else real(x, w, bias)
    model.lm_head = Recorder()
    try:
        for i in range(start, min(len(ids), start + steps)):
            model.forward(torch.tensor([ids[i]]), torch.tensor([i]), kv)
    finally:
        model.lm_head, llama.linear = head, real
    return torch.cat(seen)


def _ms(f, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=21)
    a = ap.parse_args()
    engine = EmbeddedEngine.from_path(resolve_model(a.model), engine_config(build_parser().parse_args(["serve"])))
    head = engine.model.lm_head
    if not isinstance(head, QuantWeight):
        raise SystemExit("this model's head is not quantized (run it on a GGUF model with --dtype auto)")
    h = hidden_states(engine, a.steps)
    reference = h @ dequantize(head.packed.parts[0]).T
    ways = {
        "8-bit": lambda x: quant_linear(x, head.packed),
        "8-bit + refined": QuantWeight(head.packed.parts, refine_top=REFINE_TOP),
        "residual": lambda x: quant_linear(x, head.packed, residual=True),
        "4-bit screen + refined": QuantWeight(head.packed.parts, refine_top=REFINE_TOP, screen=screen_copy(head.packed.parts[0])),
    }
    p_ref = torch.softmax(reference, 1).max(1).values
    out = {"model": engine.model_name, "states": h.shape[0], "threads": torch.get_num_threads(), "ways": {}}
    for name, way in ways.items():
        y = way(h)
        out["ways"][name] = {
            "argmax_as_fp32": round((y.argmax(1) == reference.argmax(1)).float().mean().item(), 4),
            "max_top_p_diff": round((torch.softmax(y, 1).max(1).values - p_ref).abs().max().item(), 5),
            "ms_per_token": _ms(lambda: way(h[:1]), a.repeats),
        }
    out["healing"] = _healing(engine, head, h, reference, a.repeats)
    print(json.dumps(out, indent=1))


FRAGMENTS = ("self", "ret", "se", "re", "s")  # from few allowed tokens to many


def _healing(engine: EmbeddedEngine, head: QuantWeight, h: torch.Tensor, reference: torch.Tensor, repeats: int) -> dict:
    tb = engine.tokenizer.token_bytes
    out = {}
    for frag in FRAGMENTS:
        want = frag.encode()
        allowed = torch.tensor([i for i, b in enumerate(tb) if b.startswith(want) or b.lstrip(b" ").startswith(want)])

        def refined(x: torch.Tensor) -> torch.Tensor:
            y = quant_linear(x[None], head.packed)[0]
            head.refine(y, x, allowed)
            return y[allowed]

        best = reference[:, allowed].argmax(1)
        out[frag] = {
            "allowed": allowed.numel(),
            "exact_rows": {
                "pick_as_fp32": round(
                    torch.stack([head.exact_rows(allowed, x).argmax() for x in h]).eq(best).float().mean().item(), 4
                ),
                "ms_per_token": _ms(lambda: head.exact_rows(allowed, h[0]), repeats),
                "used": allowed.numel() <= EXACT_ROWS,
            },
            "8-bit + refined": {
                "pick_as_fp32": round(torch.stack([refined(x).argmax() for x in h[:60]]).eq(best[:60]).float().mean().item(), 4),
                "ms_per_token": _ms(lambda: refined(h[0]), repeats),
            },
        }
    return out


if __name__ == "__main__":
    main()
