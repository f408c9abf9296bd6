"""`fimgate bench replay --live URL`: replay a trace in real time against a running gateway.

Each person's requests go out at their trace times over HTTP (`/v1/completions`, streamed,
with user and document), so the gateway's own cancel-previous, caching and queueing are what
is measured. Time to first token is the wall time to the first streamed text.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from fimgate.bench.replay import Outcome
from fimgate.bench.workloads.trace import TraceRequest


async def _one(client: httpx.AsyncClient, url: str, k: int, r: TraceRequest, t0: float, max_tokens: int) -> Outcome:
    await asyncio.sleep(max(0.0, t0 + r.t_ms / 1000 - time.perf_counter()))
    sent = time.perf_counter()
    body = {
        "prompt": r.text[: r.cursor],
        "suffix": r.text[r.cursor :],
        "max_tokens": 0 if r.prewarm else max_tokens,
        "stop": ["\n"],
        "stream": True,
        "user": f"live{k}",
        "document": r.file,
    }
    ttft = None
    text = []
    usage = {}
    try:
        async with client.stream("POST", url + "/v1/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                piece = chunk["choices"][0]["text"] if "choices" in chunk else ""
                if piece and ttft is None:
                    ttft = (time.perf_counter() - sent) * 1000
                text.append(piece)
                usage = chunk.get("fimgate", usage)
    except httpx.HTTPError:
        return Outcome(k, None, None, late=True, cancelled=True, dropped=True, typed_next=r.typed_next)
    latency = (time.perf_counter() - sent) * 1000
    cached = usage.get("cached_tokens", {})
    late = ttft is None or (r.next_event_ms is not None and r.t_ms + ttft > r.next_event_ms)
    return Outcome(
        k,
        ttft,
        latency,
        late and not r.prewarm,
        bool(usage.get("cancelled")),
        False,
        usage.get("prompt_tokens", 0),
        cached.get("prefix", 0),
        cached.get("shifted", 0),
        usage.get("recomputed_tokens", 0),
        usage.get("prefilled_tokens", 0),
        "",
        "".join(text),
        r.typed_next,
        prewarm=r.prewarm,
    )


async def _replay(url: str, slices: list[list[TraceRequest]], max_tokens: int) -> list[Outcome]:
    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=httpx.Timeout(120.0)) as client:
        tasks = [_one(client, url.rstrip("/"), k, r, t0, max_tokens) for k, part in enumerate(slices) for r in part]
        return list(await asyncio.gather(*tasks))


def replay_live(url: str, slices: list[list[TraceRequest]], max_tokens: int = 24) -> list[Outcome]:
    return asyncio.run(_replay(url, slices, max_tokens))
