"""The vLLM backend: the planner's token ids, streamed through vLLM's OpenAI-compatible server.

One request per plan, `POST /v1/completions` with `prompt` as token ids (the planner already
tokenized it: vLLM never re-tokenizes, so EFIM's anchor stays byte-identical and hits vLLM's
prefix cache), and:
  - `cache_salt`: per tenant, HMAC of a server secret (fimgate/backend/vllm/cache_salt.py): users never share
    cached blocks unless a deployment maps them to one tenant;
  - token healing as a constraint vLLM enforces: `structured_outputs.regex` = the backed-off
    text, then anything. The healed text is cut from the output, as the embedded engine does;
  - `kv_transfer_params.fimgate_pin` on typing requests when the servers run the keystroke pin
    connector (fimgate/backend/vllm/pin_connector.py), with the TTL the person's rhythm earns;
  - `usage.prompt_tokens_details.cached_tokens` (needs `--enable-prompt-tokens-details`) read
    into the usage report: vLLM's own count of reused tokens.
Requests go to the server that `PrefixRouter` picks; a server that does not answer is taken out
and the request retried on another, as long as no text has been streamed yet. Cancelling
closes the stream, which makes vLLM abort the request.

vLLM cannot reuse KV at a shifted position, so reuse hints and correction budgets are ignored:
re-anchors are full prefills here (README: what stock vLLM would need).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from typing import Iterator

import httpx

from fimgate.backend.base import (
    BackendError,
    BackendUnavailableError,
    CancelToken,
    ContextOverflowError,
    FimPlan,
    Finished,
    PinReceipt,
    StreamEvent,
    TextDelta,
    Tokenizer,
    UsageReport,
)
from fimgate.backend.pinning import KeystrokePins
from fimgate.backend.vllm.cache_salt import CacheSalts
from fimgate.backend.vllm.router import PrefixRouter


@dataclass(frozen=True)
class VllmConfig:
    urls: tuple[str, ...]
    model: str | None = None  # the served model name; None: the first one the first server lists
    block_size: int = 32  # the servers' --block-size (vLLM caches whole blocks)
    capacity_tokens: int = 65536  # KV tokens per server, for the router's view of what stays cached
    pins: bool = False  # the servers run KeystrokePinConnector
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 120.0


def healing_regex(text: str) -> str:
    """A regex for 'starts with `text`' in the dialect vLLM's grammar backends accept."""
    out = []
    for ch in text:
        if ch.isalnum() or ch == "_" or ord(ch) > 127:
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == " ":
            out.append(" ")
        elif ord(ch) < 32:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append("\\" + ch)
    return "".join(out) + "[\\s\\S]*"


class VllmBackend:
    def __init__(
        self, config: VllmConfig, tokenizer: Tokenizer, salts: CacheSalts | None = None, client: httpx.Client | None = None
    ) -> None:
        self.config = config
        self._tokenizer = tokenizer
        self.salts = salts or CacheSalts()
        self.router = PrefixRouter(list(config.urls), config.block_size, config.capacity_tokens)
        self.pins = KeystrokePins("pin" if config.pins else "lru-only")
        self._client = client or httpx.Client(timeout=httpx.Timeout(config.read_timeout_s, connect=config.connect_timeout_s))
        self._model = config.model
        self.max_model_len: int | None = None
        if self._model is None:
            self._discover()

    def _discover(self) -> None:
        """Ask the servers what they serve (the first that answers)."""
        for s in self.router.servers:
            try:
                data = self._client.get(f"{s.url}/v1/models").raise_for_status().json()["data"][0]
            except (httpx.HTTPError, KeyError, IndexError, ValueError):
                continue
            self._model, self.max_model_len = data["id"], data.get("max_model_len")
            return
        raise BackendUnavailableError(f"no vLLM server answered /v1/models at {', '.join(self.config.urls)}")

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    @property
    def model_name(self) -> str:
        return self._model

    @property
    def context_tokens(self) -> int | None:
        """The servers' max_model_len, where they report it."""
        return self.max_model_len

    def stats(self) -> dict:
        return {"servers": self.router.stats(), "moves": self.router.moves}

    # vLLM pins travel with requests (see _body); there is nothing to pin out of band
    def pin(self, user_id: str, prompt_ids: tuple[int, ...], ttl_s: float) -> PinReceipt | None:
        return None

    def unpin(self, receipt: PinReceipt) -> None:
        return None

    def _body(self, plan: FimPlan) -> dict:
        s = plan.sampling
        body = {
            "model": self._model,
            "prompt": list(plan.prompt_ids),
            "max_tokens": max(1, s.max_tokens),
            "temperature": s.temperature,
            "top_p": s.top_p,
            "stream": True,
            "stream_options": {"include_usage": True},
            "cache_salt": self.salts.salt_for(plan.user_id),
            "skip_special_tokens": True,
        }
        if s.stop:
            body["stop"] = list(s.stop)
        if s.seed is not None:
            body["seed"] = s.seed
        if s.min_token_prob:
            body["logprobs"] = 0  # each sampled token's own: the stream ends before an unsure one
        if plan.stop_token_ids:
            body["stop_token_ids"] = list(plan.stop_token_ids)
        if plan.healing:
            body["structured_outputs"] = {"regex": healing_regex(plan.healing.text)}
        if self.config.pins and plan.pins_anchor:
            now = plan.issued_at_s if plan.issued_at_s is not None else time.monotonic()
            key = hashlib.sha256(f"{plan.user_id}\0{plan.session_id}".encode("utf-8")).hexdigest()[:32]
            body["kv_transfer_params"] = {
                "fimgate_pin": {
                    "key": key,
                    "tokens": plan.pin_tokens,
                    "ttl_s": self.pins.ttl_s((plan.user_id, plan.session_id), now),
                }
            }
        return body

    def generate(self, plan: FimPlan, cancel: CancelToken | None = None) -> Iterator[StreamEvent]:
        if self.max_model_len and len(plan.prompt_ids) + max(1, plan.sampling.max_tokens) > self.max_model_len:
            raise ContextOverflowError(
                f"prompt of {len(plan.prompt_ids)} tokens + {plan.sampling.max_tokens} to "
                f"generate exceeds the vLLM server's {self.max_model_len}-token context"
            )
        namespace = self.salts.tenant_of(plan.user_id)
        body = self._body(plan)
        tried: set[int] = set()
        while True:
            index, predicted = self.router.pick(namespace, plan.prompt_ids, exclude=tried)
            tried.add(index)
            stream = _Stream(plan)
            try:
                yield from stream.run(self._client, self.router.servers[index].url, body, cancel)
                return
            except (httpx.TransportError, _ServerError) as e:
                self.router.mark_down(index)
                if stream.emitted:
                    raise BackendUnavailableError(f"vLLM server {self.router.servers[index].url} failed mid-stream: {e}") from e
            finally:
                self.router.finished(index, stream.cached_tokens, predicted)


class _ServerError(Exception):
    pass


class _Stream:
    """One streamed completion from one server, turned into fimgate's events."""

    def __init__(self, plan: FimPlan) -> None:
        self.plan = plan
        self.emitted = False
        self.cached_tokens: int | None = None

    def run(self, client: httpx.Client, url: str, body: dict, cancel: CancelToken | None) -> Iterator[StreamEvent]:
        plan = self.plan
        heal = plan.healing.text if plan.healing else ""
        raw, text = "", ""
        usage: dict = {}
        finish = None
        ttft_ms = None
        t0 = time.perf_counter()
        with client.stream("POST", f"{url}/v1/completions", json=body) as r:
            if r.status_code >= 500:
                raise _ServerError(f"HTTP {r.status_code}")
            if r.status_code != 200:
                r.read()
                message = _error_message(r)
                if "context length" in message or "maximum" in message:
                    raise ContextOverflowError(message)
                raise BackendError(f"vLLM refused the request: {message}")
            for line in r.iter_lines():
                if cancel is not None and cancel.cancelled:
                    finish = "cancelled"
                    break
                if cancel is not None and cancel.has_enough:
                    finish = "stop"  # closing the stream aborts the request in vLLM
                    break
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    usage = chunk["usage"]
                unsure = False
                for choice in chunk.get("choices", []):
                    if choice.get("text"):
                        if ttft_ms is None:
                            ttft_ms = (time.perf_counter() - t0) * 1000
                        sure, unsure = _sure_part(choice, raw, heal, plan.sampling.min_token_prob)
                        raw += sure
                    finish = "stop" if unsure else choice.get("finish_reason") or finish
                if plan.sampling.max_tokens == 0:
                    continue  # a pre-warm: vLLM generated one token to fill the cache; nobody sees it
                visible = raw[len(heal) :] if raw.startswith(heal) else ("" if heal.startswith(raw) else raw)
                if len(visible) > len(text):
                    self.emitted = True
                    yield TextDelta(visible[len(text) :])
                    text = visible
                if unsure:
                    break  # closing the stream aborts the request in vLLM
        total_ms = (time.perf_counter() - t0) * 1000
        details = usage.get("prompt_tokens_details") or {}
        prompt = usage.get("prompt_tokens", len(plan.prompt_ids))
        cached = details.get("cached_tokens") or 0
        self.cached_tokens = cached if usage else None
        completion = 0 if plan.sampling.max_tokens == 0 else usage.get("completion_tokens", 0)
        decode_s = (total_ms - (ttft_ms or total_ms)) / 1000
        yield Finished(
            text,
            UsageReport(
                prompt_tokens=prompt,
                prefix_cached_tokens=cached,
                prefilled_tokens=prompt - cached if usage else prompt,
                completion_tokens=completion,
                ttft_ms=ttft_ms if ttft_ms is not None else total_ms,
                decode_tokens_per_s=(completion - 1) / decode_s if completion > 1 and decode_s > 0 else None,
                total_ms=total_ms,
                cancelled=finish == "cancelled",
                finish_reason=finish,
            ),
        )


def _sure_part(choice: dict, raw: str, heal: str, floor: float | None) -> tuple[str, bool]:
    """The choice's text up to the first token the model gave less than `floor` once the
    suggestion (the text after the healed part) holds more than white space, and whether it was
    cut there (the embedded engine's rule, decode_loop.unsure). Token by token where the tokens
    spell the text; otherwise the piece as one (vLLM streams a token a piece)."""
    text = choice["text"]
    lp = choice.get("logprobs") or {}
    logprobs = [x for x in lp.get("token_logprobs") or [] if x is not None]
    if not floor or not logprobs:
        return text, False
    tokens = lp.get("tokens") or []
    if "".join(tokens) != text or len(tokens) != len(logprobs):
        tokens, logprobs = [text], logprobs[:1]
    sure = ""
    for tok, logprob in zip(tokens, logprobs):
        said = raw + sure
        shown = said[len(heal) :] if said.startswith(heal) else ""
        if shown.strip() and math.exp(logprob) < floor:
            return sure, True
        sure += tok
    return sure, False


def _error_message(r: httpx.Response) -> str:
    try:
        err = r.json()
        return str(err.get("error", {}).get("message") or err.get("message") or err)
    except ValueError:
        return r.text[:500]
