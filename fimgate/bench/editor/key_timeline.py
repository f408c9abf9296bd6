"""Where a key's time went in `fimgate bench editor`: the keys the editor replay timed, lined up
with the server's request log (`fimgate serve --request-log`, gateway/request_log.py) by wall
clock. For each key, the requests that arrived before the next key: how long after the key the
first one arrived (the editor's trigger delay and the extension's own work), when the gateway had
its first text, what it prefilled. A key with no ghost text gets one reason:

    no request   nothing reached the gateway before the next key (the extension answered from its
                 cache, decided not to ask, or VS Code did not trigger)
    late         a request arrived but had no text before the next key (queued, prefilling,
                 decoding, or superseded first)
    empty        the gateway answered in time with nothing to show
    not drawn    the gateway had text in time but no ghost text was drawn (the extension or VS
                 Code dropped it, or it came too close to the next key to be drawn)
"""

from __future__ import annotations

import statistics

REASONS = ("no request", "late", "empty", "not drawn")


def requests_of_key(key: dict, log: list[dict]) -> list[dict]:
    """The logged requests (warm-ups aside) that arrived between this key and the next."""
    t0, t1 = key["at"], key["at"] + key["window_ms"]
    return [r for r in log if r["kind"] != "warmup" and t0 <= r["at"] * 1000 < t1]


def explain(key: dict, log: list[dict]) -> dict:
    """What the server saw of one key: its requests, and why nothing was shown if nothing was."""
    reqs = requests_of_key(key, log)
    t0, w = key["at"], key["window_ms"]
    out: dict = {"asked_ms": round(reqs[0]["at"] * 1000 - t0, 1) if reqs else None, "requests": len(reqs)}
    if reqs:
        r = reqs[-1]  # the one the person's screen waited for: later ones cancel earlier ones
        u = r["usage"] or {}
        out.update(
            kind=r["kind"],
            first_text_ms=r["first_text_ms"],
            prefilled=u.get("prefilled_tokens"),
            cancelled=u.get("cancelled", r.get("closed", False)),
        )
    shown = key["shown_ms"] is not None and key["shown_ms"] <= w
    if not shown:
        out["why_none"] = _why(reqs, t0, w)
    return out


def _why(reqs: list[dict], t0: float, w: float) -> str:
    if not reqs:
        return "no request"
    in_time = [r for r in reqs if r["first_text_ms"] is not None and r["at"] * 1000 - t0 + r["first_text_ms"] < w]
    if in_time:
        return "not drawn"
    answered = [r for r in reqs if r["usage"] and not r["usage"]["cancelled"] and r["end_ms"] + r["at"] * 1000 - t0 < w]
    return "empty" if answered else "late"


def timeline(keys: list[dict], log: list[dict]) -> dict:
    """Per key explain(); in sum: why keys showed nothing, and the medians of where time went."""
    per_key = [explain(k, log) for k in keys]
    why = {reason: sum(p.get("why_none") == reason for p in per_key) for reason in REASONS}
    asked = [p["asked_ms"] for p in per_key if p["asked_ms"] is not None]
    model = [p for p in per_key if p.get("kind") in ("typing", "first_window")]
    first = [p["first_text_ms"] for p in model if p["first_text_ms"] is not None]
    late = [p["prefilled"] for p in per_key if p.get("why_none") == "late" and p.get("prefilled") is not None]
    # keys whose ghost text had to come from the gateway (a request before the next key), shown in time
    from_model = [k["shown_ms"] for k, p in zip(keys, per_key) if p["requests"] and "why_none" not in p]
    return {
        "why_none": why,
        "first_window_share": round(sum(p.get("kind") == "first_window" for p in per_key) / max(1, len(per_key)), 3),
        "asked_share": round(len(asked) / max(1, len(keys)), 3),  # keys that sent the gateway a request
        "asked_p50_ms": _median(asked),  # key -> the request arrives
        "type_through_share": round(sum(p.get("kind") == "type_through" for p in per_key) / max(1, len(keys)), 3),
        "model_first_text_p50_ms": _median(first),  # arrival -> first text, requests that ran the model
        "late_prefilled_p50": _median(late),  # tokens prefilled by the requests that came too late
        "asked_shown_p50_ms": _median(from_model),  # key -> ghost text, keys that needed a request
        "per_key": per_key,
    }


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 1) if xs else None
