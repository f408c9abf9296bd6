"""Embedded-engine speed on CUDA, run by fimgate/bench/engine/gpu_check.sh on a lent GPU machine.

The bundled GGUF (98 MB) cannot travel to that machine, so the model is the bundled model's shape
(config.json + tokenizer.json, written by `--write-shape DIR` here) with random weights
(fimgate/bench/engine/random_model.py): speed does not depend on weight values. End of text is switched off
so every decode runs its full length. Prints one JSON row per (device, dtype), the same fields
as `fimgate bench engine`, with and without CUDA graphs (fimgate/backend/embedded/cuda_graphs.py).

    python -m fimgate.bench.micro.gpu_engine --write-shape .gpu/smollm2          # here, once
    python -m fimgate.bench.micro.gpu_engine --shape .gpu/smollm2 --out r.json   # there
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from fimgate.backend.embedded.engine import EmbeddedEngine, EngineConfig
from fimgate.backend.model.config import ModelConfig
from fimgate.backend.model.llama import KVBuffer
from fimgate.backend.model.tokenizer import HFTokenizer
from fimgate.bench.engine.random_model import random_model
from fimgate.bench.engine.speed import measure


def write_shape(out_dir: str) -> None:
    import shutil
    import tempfile

    from fimgate.backend.model.hf_export import export_hf
    from fimgate.backend.model.registry import resolve_model

    with tempfile.TemporaryDirectory() as tmp:
        export_hf(resolve_model("smollm2-135m"), tmp)
        os.makedirs(out_dir, exist_ok=True)
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tmp, name), out_dir)


def decode_step_ms(engine: EmbeddedEngine, context: int, steps: int = 50) -> float:
    """One token's step at `context` cached tokens (a graph replay where the engine has them),
    synchronised: the floor under decode."""
    dev = engine.model.device
    kv = KVBuffer.empty(engine.model.cfg, engine.capacity, device=dev, dtype=engine.model.dtype)
    for _ in range(5):
        engine._step(17, context, kv)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        engine._step(17, context, kv)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1000 / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-shape", help="write the bundled model's config + tokenizer to this folder and exit")
    ap.add_argument("--shape", default=".gpu/smollm2")
    ap.add_argument(
        "--devices",
        default="cuda:float32:eager,cuda:float32,cuda:bfloat16,cpu:float32",
        help="device:dtype[:eager] (eager: no CUDA graphs)",
    )
    ap.add_argument("--cached-tokens", type=int, default=2800)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.write_shape:
        write_shape(args.write_shape)
        return
    cfg = ModelConfig.from_hf(json.load(open(os.path.join(args.shape, "config.json"), encoding="utf-8")))
    tok = HFTokenizer.from_folder(args.shape)
    tok.eos_id = None  # random weights: never stop early
    loaded = random_model(cfg, tok, seed=0, name="SmolLM2-135M shape, random weights")
    rows = []
    for spec in args.devices.split(","):
        device, dtype, *mode = spec.split(":")
        t = time.perf_counter()
        engine = EmbeddedEngine(
            loaded,
            EngineConfig(
                device=device, dtype=dtype, budget_tokens=16384, max_context=4096, num_slots=2, cuda_graphs=mode != ["eager"]
            ),
        )
        row = {
            "device": torch.cuda.get_device_name() if device == "cuda" else f"cpu x{torch.get_num_threads()}",
            "dtype": dtype,
            "cuda_graphs": engine._graphs is not None,
            "engine_start_s": round(time.perf_counter() - t, 2),
            **measure(engine, prefill_tokens=1000, cached_tokens=args.cached_tokens),
            "forward_1_token_ms_at_32": round(decode_step_ms(engine, 32), 2),
            "forward_1_token_ms_at_2800": round(decode_step_ms(engine, 2800), 2),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
        del engine
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
