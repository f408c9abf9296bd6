"""What `fimgate serve`, `complete`, `lsp` and `bench` share: the engine, service and backend flags,
and the one place that turns them into a backend or a CompletionService. A bad flag or model is a
UserError: one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import argparse
import sys

from fimgate.backend.embedded.shifted_reuse import RECOMPUTE_CAP

DEFAULT_PORT = 8418


class UserError(Exception):
    pass


def engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        default=None,
        help="a model by name (qwen2.5-coder-0.5b, the default; qwen2.5-coder-1.5b; smollm2-135m: `fimgate models`), "
        "or a GGUF file or Hugging Face folder",
    )
    p.add_argument("--template", default=None, help="FIM template family (default: from the model's name)")
    p.add_argument("--budget-tokens", type=int, default=16384, help="KV block pool size, in tokens, for all users")
    p.add_argument("--budget-mb", type=float, default=None, help="KV block pool size in MiB (overrides --budget-tokens)")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument(
        "--slots",
        type=int,
        default=4,
        help="requests the embedded engine runs at once, their next tokens in one batched step (each slot holds a "
        "context of K/V)",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16", "int8"],
        help="weights. auto (default): a GGUF file's quantized weights stay as the file stores them and are "
        "multiplied directly (CPU; activations in 8-bit blocks, as llama.cpp), anything else runs in float32; "
        "float32: every weight dequantized to fp32 (the exact reference); bfloat16: weights and KV cache; int8: "
        "int8 weights for one-token steps, fp32 otherwise (CPU)",
    )
    p.add_argument(
        "--prefill-dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16"],
        help="bfloat16: prompts of more than 4 tokens multiply by bf16 copies of the linears (CPU; 2.1x faster "
        "prefill, 97.5-98%% of greedy completions identical to float32); auto (default): bfloat16 where the CPU "
        "multiplies bf16 natively (AVX512-BF16, AMX), float32 elsewhere; float32: the exact reference",
    )
    p.add_argument(
        "--step-dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16"],
        help="bfloat16: one-token steps (decoding, a keystroke's append) multiply by bf16 copies of the linears, "
        "fp32 activations and sums (CPU; half the bytes a step reads; 99%% of greedy completions identical to "
        "float32); auto (default): bfloat16 where the CPU multiplies bf16 natively, float32 elsewhere; float32: "
        "the exact reference; --dtype int8 steps use int8 copies instead",
    )
    p.add_argument(
        "--head",
        default="screened",
        choices=["screened", "full"],
        help="greedy steps' output head: screened in int8, then the rows that can win in fp32 (same "
        "argmax), or the full fp32 head (CPU fp32)",
    )
    p.add_argument(
        "--speculate",
        type=int,
        default=4,
        metavar="N",
        help="greedy decoding verifies up to N draft tokens a step, from the session's last suggestion and the "
        "prompt (same output, fewer forwards; 0: off)",
    )
    p.add_argument(
        "--recompute-cap",
        type=int,
        default=RECOMPUTE_CAP,
        metavar="TOKENS",
        help="suffix-KV correction recomputes at most this many moved tokens on a re-anchor, whatever "
        "--correction's share (default 64: one prefill chunk; 0: no cap)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="compute threads, fixed (default: before each request, as many as the cores other processes leave free)",
    )


def correction_share(value: str) -> float | str:
    if value == "off":
        return value
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"a share of the shifted tokens in [0, 1], or 'off', not {value!r}")
    return share


def service_args(p: argparse.ArgumentParser, first_window: bool = True) -> None:
    """What the served path takes beyond the engine: serve, complete and lsp alike. `first_window`:
    whether keys at a cold place are answered from a short window by default (serve and lsp: a person
    typing; not `complete`, one request with no next key)."""
    from fimgate.gateway.build import CORRECTION_SHARE
    from fimgate.gateway.first_window import TOKENS

    p.add_argument(
        "--correction",
        type=correction_share,
        default=None,
        metavar="SHARE|off",
        help="suffix-KV correction on re-anchors: re-rotate cached text that moved and recompute this "
        f"share of it (default {CORRECTION_SHARE}; 0: re-rotate only; off: exact reuse only)",
    )
    p.add_argument(
        "--type-through",
        choices=["on", "off"],
        default="on",
        help="answer typing the beginning of the session's last suggestion with its rest, without a model call",
    )
    p.add_argument(
        "--first-window-tokens",
        type=int,
        default=TOKENS if first_window else 0,
        metavar="N",
        help="a key at a place whose prompt is not cached is answered from a short window (N tokens of prefix) "
        f"while the full one prefills behind it (default {TOKENS if first_window else 0}; 0: off)",
    )
    p.add_argument(
        "--request-log",
        default=None,
        metavar="FILE",
        help="append a JSON line per request to FILE: arrival, first text, cost, how it ended (never the text)",
    )


def backend_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("vLLM backend (--backend vllm)")
    g.add_argument(
        "--backend",
        choices=["embedded", "vllm"],
        default="embedded",
        help="the embedded engine, or vLLM servers (--model then names their tokenizer)",
    )
    g.add_argument("--vllm-url", default=None, metavar="URL[,URL...]", help="vLLM OpenAI-compatible servers")
    g.add_argument("--vllm-model", default=None, help="served model name (default: what the first server lists)")
    g.add_argument("--vllm-block-size", type=int, default=32, help="the servers' --block-size")
    g.add_argument("--vllm-cache-tokens", type=int, default=65536, help="KV tokens per server, for routing")
    g.add_argument("--vllm-pins", action="store_true", help="the servers load fimgate.backend.vllm.pin_connector")
    g.add_argument(
        "--salt-secret-file",
        default=None,
        help="secret for per-tenant cache salts (default: $FIMGATE_SALT_SECRET, else random per start)",
    )
    g.add_argument("--tenants", default=None, metavar="FILE", help="'USER TENANT' lines: users sharing a cache")


def vllm_config(a):
    """(VllmConfig, CacheSalts) for --backend vllm, else (None, None); bad flags are a UserError."""
    if getattr(a, "backend", "embedded") != "vllm":
        return None, None
    from fimgate.backend.vllm.backend import VllmConfig
    from fimgate.backend.vllm.cache_salt import CacheSalts

    urls = tuple(u.strip() for u in (a.vllm_url or "").split(",") if u.strip())
    if not urls:
        raise UserError("--backend vllm needs --vllm-url URL[,URL...]")
    try:
        salts = CacheSalts.from_files(a.salt_secret_file, a.tenants)
    except (OSError, ValueError) as e:
        raise UserError(f"cache salts: {e}") from None
    return VllmConfig(
        urls=urls, model=a.vllm_model, block_size=a.vllm_block_size, capacity_tokens=a.vllm_cache_tokens, pins=a.vllm_pins
    ), salts


def engine_config(a):
    from fimgate.backend.embedded.engine import EngineConfig
    from fimgate.backend.pinning import POLICIES

    budget_bytes = None if a.budget_mb is None else int(a.budget_mb * 1024 * 1024)
    policy = (getattr(a, "pin_policy", "pin") or "pin").split(",")[0].strip()
    if policy not in POLICIES:
        raise UserError(f"unknown pin policy {policy!r}; known: {', '.join(POLICIES)}")
    try:
        return EngineConfig(
            block_size=a.block_size,
            budget_tokens=a.budget_tokens,
            budget_bytes=budget_bytes,
            device=a.device,
            pin_policy=policy,
            dtype=a.dtype,
            prefill_dtype=a.prefill_dtype,
            step_dtype=getattr(a, "step_dtype", "auto"),
            screened_head=a.head == "screened",
            speculate=getattr(a, "speculate", 4),
            recompute_cap=getattr(a, "recompute_cap", RECOMPUTE_CAP),
            threads=a.threads,
            num_slots=getattr(a, "slots", 4),
        )
    except ValueError as e:
        raise UserError(str(e)) from None


def service_config(a):
    """The typed ServiceConfig of a command's flags and the environment ($FIMGATE_SALT_SECRET), built
    and validated once; a bad flag is a UserError before any model loads."""
    from fimgate.gateway.build import CORRECTION_SHARE, ServiceConfig

    vllm, salts = vllm_config(a)
    correction = getattr(a, "correction", None)
    if vllm is not None and correction not in (None, "off"):
        print(
            "fimgate: the vLLM backend serves exact reuse only (prefix hits, EFIM appends): --correction does not apply",
            file=sys.stderr,
        )
    share = CORRECTION_SHARE if correction is None else None if correction == "off" else correction
    try:
        return ServiceConfig(
            model=a.model,
            template=getattr(a, "template", None),
            engine=engine_config(a),
            vllm=vllm,
            salts=salts,
            correction=share,
            request_timeout_s=getattr(a, "request_timeout_s", None),
            type_through=getattr(a, "type_through", "on") == "on",
            request_log=getattr(a, "request_log", None),
            first_window_tokens=getattr(a, "first_window_tokens", 0),
        )
    except ValueError as e:
        raise UserError(str(e)) from None


def _loading(build, config):
    from fimgate.backend.base import BackendUnavailableError
    from fimgate.backend.model.weights import ModelLoadError

    try:
        return build(config)
    except (ModelLoadError, FileNotFoundError, ValueError, BackendUnavailableError, OSError) as e:
        raise UserError(str(e)) from None


def load_engine(a):
    """The backend for a command's --model, engine and --backend flags, or a UserError."""
    from fimgate.gateway.build import build_backend

    return _loading(build_backend, service_config(a))


def load_service(a):
    """The CompletionService a command's flags describe (serve, complete, lsp), or a UserError."""
    from fimgate.gateway.build import build_service

    return _loading(build_service, service_config(a))


def checked_strategies(a) -> list[str]:
    """The --strategies list, each checked (efim+correction:SHARE included), or a UserError."""
    from fimgate.bench.replay.strategies import parse

    names = [s.strip() for s in a.strategies.split(",") if s.strip()]
    try:
        for name in names:
            parse(name)
    except ValueError as e:
        raise UserError(str(e)) from None
    return names
