"""`fimgate bench replay --live URL`: replay a trace in real time against a running gateway.

Each person's requests go out at their trace times over HTTP (`/v1/completions`, streamed,
with user and document), so the gateway's own cancel-previous, caching and queueing are what
is measured. Time to first token is the wall time to the first streamed text.

Acceptance: the replay's people send no events, so the gateway infers them from their next
requests (fimgate/gateway/events.py). After the replay each person's verdicts are read back
(`GET /v1/events/recent`) and compared, request by request, with the replay's own "useful" (what
the person typed next starts with the suggestion): `acceptance_agreement`.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from fimgate.bench.replay.simulate import Outcome
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
        **({"input_extra": [{"filename": c.path, "text": c.text} for c in r.context]} if r.context else {}),
    }
    ttft = None
    text = []
    usage = {}
    cid = ""
    try:
        async with client.stream("POST", url + "/v1/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                cid = chunk.get("id", cid)
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
        completion_id=cid,
    )


async def _replay(url: str, slices: list[list[TraceRequest]], max_tokens: int) -> tuple[list[Outcome], dict[str, str]]:
    t0 = time.perf_counter()
    url = url.rstrip("/")
    async with httpx.AsyncClient(timeout=httpx.Timeout(120.0)) as client:
        tasks = [_one(client, url, k, r, t0, max_tokens) for k, part in enumerate(slices) for r in part]
        outcomes = list(await asyncio.gather(*tasks))
        verdicts = {}
        for k in range(len(slices)):
            r = await client.get(url + "/v1/events/recent", params={"user": f"live{k}"})
            if r.status_code == 200:
                verdicts.update({v["completion_id"]: v["verdict"] for v in r.json()["data"]})
    return outcomes, verdicts


def replay_live(url: str, slices: list[list[TraceRequest]], max_tokens: int = 24) -> tuple[list[Outcome], dict[str, str]]:
    """The outcomes, and the gateway's acceptance verdicts by completion id."""
    return asyncio.run(_replay(url, slices, max_tokens))


def acceptance_agreement(outcomes: list[Outcome], verdicts: dict[str, str]) -> dict:
    """Requests whose suggestion the gateway judged (accepted or dismissed, inferred from the next
    requests), and the share on which that agrees with the replay's "useful"."""
    judged = [(o, verdicts[o.completion_id]) for o in outcomes if o.completion.strip() and o.completion_id in verdicts]
    agree = [(v == "accepted") == o.typed_next.startswith(o.completion) for o, v in judged]
    return {
        "suggestions": sum(bool(o.completion.strip()) and not o.cancelled for o in outcomes),
        "judged": len(judged),
        "agree_share": round(sum(agree) / len(judged), 4) if judged else None,
        "inferred_accepted": sum(v == "accepted" for _, v in judged),
        "replay_useful": sum(o.typed_next.startswith(o.completion) for o, _ in judged),
    }
