"""`fimgate bench abuse`: normal users' time to first token with and without one abusive client.

One `fimgate serve` (a subprocess, real HTTP on loopback, the flags given) serves N people who
type: each replays its own slice of a trace's debounced requests, streamed, as an editor sends
them (user, document, max_tokens, newline stop), one after another. The run is repeated with
nobody else ("none", first and last) and beside one abusive client per case, which loops until
the people are done; each run has new people, so each starts from the same cold cache:

    huge-context   /infill with ~900 KB of repetitive input_extra, changed every time
    long-heal      a prompt ending in a 1 MB run of letters, max_tokens 1
    disconnect     a 2,048-token generation, abandoned after 0.5 s
    slow-body      64 connections sending a body one byte a second
    half-headers   256 connections that never finish their headers
    big-body       chunked 10 MB bodies without Content-Length
    big-sessions   a 3.5M-character prompt and a 3.5M-character one-line suffix, a new document
                   each time (what each session's memories keep: type-through, acceptance)
    mint-ids       type along its own suggestion (type-through answers, no model call) and post
                   `select` for each answer's id (acceptance inflation)
    lsp-connect-close, lsp-unauthenticated
                   against a `fimgate lsp --tcp` in front of the same gateway, with an honest
                   client beside it (fimgate/bench/abuse/lsp.py): the server stays up, the honest
                   client is answered, nothing of its document reaches the attacker

Reported per case: the people's TTFT p50 / p90 / p99 (client-side: the first streamed text) and
p99 over "none"'s, the requests they got answered, what the abuser sent, and the server's
resident memory after the case (its documented ceiling: 1.5x the model's file plus the KV
memory the engine is configured for).
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time

import httpx

from fimgate.bench.abuse.lsp import LSP_CASES, LspServer, run_lsp_case
from fimgate.bench.common.memory import rss_bytes
from fimgate.bench.common.served import start_serve
from fimgate.bench.workloads.trace import TraceRequest

CASES = (
    "none",
    "huge-context",
    "long-heal",
    "disconnect",
    "slow-body",
    "half-headers",
    "big-body",
    "big-sessions",
    "mint-ids",
    *LSP_CASES,
)
DEFAULT_RUNS = CASES + ("none",)
COUNTING = "numbers = [" + ", ".join(str(i) for i in range(40)) + ", "


def _ttft_ms(client: httpx.Client, url: str, user: str, r: TraceRequest, max_tokens: int) -> float | None:
    body = {
        "prompt": r.text[: r.cursor],
        "suffix": r.text[r.cursor :],
        "max_tokens": max_tokens,
        "stop": ["\n"],
        "stream": True,
        "user": user,
        "document": r.file,
    }
    sent = time.perf_counter()
    try:
        with client.stream("POST", url + "/v1/completions", json=body) as resp:
            if resp.status_code != 200:
                return None
            for line in resp.iter_lines():
                if line.startswith("data: {"):
                    return (time.perf_counter() - sent) * 1000  # the first event: text, or the final report
    except httpx.HTTPError:
        return None
    return None


def _person(url: str, user: str, requests: list[TraceRequest], max_tokens: int, gap_s: float, out: list) -> None:
    with httpx.Client(timeout=httpx.Timeout(120.0)) as client:
        for r in requests:
            out.append(_ttft_ms(client, url, user, r, max_tokens))
            time.sleep(gap_s)


class Abuser(threading.Thread):
    """Runs one abuse case in a loop until stopped; counts what it sent."""

    def __init__(self, url: str, case: str) -> None:
        super().__init__(daemon=True)
        self.url, self.case = url, case
        self.stop = threading.Event()
        self.sent = 0
        self.host, self.port = url.removeprefix("http://").split(":")

    def run(self) -> None:
        getattr(self, "_" + self.case.replace("-", "_"))()

    def _loop(self, one) -> None:
        with httpx.Client(timeout=httpx.Timeout(120.0)) as client:
            while not self.stop.is_set():
                try:
                    one(client)
                except httpx.HTTPError:
                    pass
                self.sent += 1

    def _huge_context(self) -> None:
        def one(client):
            text = f"q = {self.sent}\n" * 150_000  # ~900 KB, different every time: a re-anchor each
            client.post(
                self.url + "/infill",
                json={
                    "input_prefix": "def f(x):\n    return ",
                    "input_suffix": "\n",
                    "n_predict": 8,
                    "user": "abuser",
                    "filename": "b.py",
                    "input_extra": [{"filename": "a.py", "text": text}],
                },
            )

        self._loop(one)

    def _long_heal(self) -> None:
        body = {"prompt": "x" * 1_000_000, "max_tokens": 1, "raw": True, "user": "abuser"}
        self._loop(lambda client: client.post(self.url + "/v1/completions", json=body))

    def _disconnect(self) -> None:
        body = {"prompt": COUNTING, "max_tokens": 2048, "raw": True, "user": "abuser"}

        def one(client):
            try:
                client.post(self.url + "/v1/completions", json=body, timeout=0.5)
            except httpx.TimeoutException:
                pass

        self._loop(one)

    def _held_sockets(self, count: int, head: bytes, drip: bytes | None) -> None:
        socks: list[socket.socket] = []
        while not self.stop.is_set():
            while len(socks) < count:
                try:
                    s = socket.create_connection((self.host, int(self.port)), timeout=5)
                    s.sendall(head)
                    socks.append(s)
                    self.sent += 1
                except OSError:
                    break
            time.sleep(1.0)
            for s in list(socks):
                try:
                    if drip is not None:
                        s.sendall(drip)
                    else:
                        s.settimeout(0.001)
                        if s.recv(1) == b"":
                            raise OSError("closed by the server")
                except socket.timeout:
                    pass
                except OSError:
                    socks.remove(s)
                    s.close()
        for s in socks:
            s.close()

    def _slow_body(self) -> None:
        head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
        self._held_sockets(64, head, b" ")

    def _half_headers(self) -> None:
        self._held_sockets(256, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n", None)

    def _big_body(self) -> None:
        block = b"a" * (1024 * 1024)

        def chunks():
            yield b'{"prompt": "'
            for _ in range(10):
                yield block
            yield b'"}'

        self._loop(lambda client: client.post(self.url + "/v1/completions", content=chunks()))

    def _big_sessions(self) -> None:
        prompt, suffix = "x = 1\n" * 583_000 + "y = ", "z" * 3_500_000  # ~3.5M characters each

        def one(client):
            body = {"prompt": prompt, "suffix": suffix, "max_tokens": 1, "user": "abuser", "document": f"d{self.sent}.py"}
            client.post(self.url + "/v1/completions", json=body)

        self._loop(one)

    def _mint_ids(self) -> None:
        def one(client):
            doc = f"m{self.sent}.py"
            ask = lambda before: client.post(  # noqa: E731
                self.url + "/v1/completions",
                json={"prompt": before, "suffix": "\n", "max_tokens": 16, "user": "abuser", "document": doc},
            ).json()
            first = ask(COUNTING)
            text = first["choices"][0]["text"]
            for n in range(1, len(text)):  # typing along it: type-through answers, each with an id
                ids = [first["id"], ask(COUNTING + text[:n]).get("id")]
                for cid in ids:
                    client.post(self.url + "/v1/events", json={"type": "select", "completion_id": cid, "user": "abuser"})

        self._loop(one)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def run_case(url: str, case: str, slices: list[list[TraceRequest]], max_tokens: int, gap_s: float, run_no: int = 0) -> dict:
    abuser = Abuser(url, case) if case not in ("none", *LSP_CASES) else None  # LSP cases: run_lsp_case
    if abuser is not None:
        abuser.start()
        time.sleep(1.0)  # the abuse is under way before the people start
    results: list[list] = [[] for _ in slices]
    # new people each run: every case starts from the same cold cache, none inherits another's
    people = [
        threading.Thread(target=_person, args=(url, f"{case}#{run_no}/person{k}", part, max_tokens, gap_s, results[k]))
        for k, part in enumerate(slices)
    ]
    t0 = time.perf_counter()
    for p in people:
        p.start()
    for p in people:
        p.join()
    took = time.perf_counter() - t0
    if abuser is not None:
        abuser.stop.set()
        abuser.join(timeout=30)
    ttfts = [t for part in results for t in part]
    answered = [t for t in ttfts if t is not None]
    # an unanswered request sorts last: percentiles over answered ones only would reward failing
    ranked = answered + [float("inf")] * (len(ttfts) - len(answered))
    return {
        "case": case,
        "requests": len(ttfts),
        "answered": len(answered),
        "seconds": round(took, 1),
        "ttft_ms": {f"p{q}": _round(_percentile(ranked, q)) for q in (50, 90, 99)},
        "ttft_ms_mean": _round(statistics.fmean(answered)) if answered else None,
        "abuser_sent": abuser.sent if abuser is not None else 0,
    }


def _round(x: float | None) -> float | None:
    return None if x is None else (x if x == float("inf") else round(x, 1))


def run(
    slices: list[list[TraceRequest]],
    cases: list[str],
    flags: list[str],
    max_tokens: int = 16,
    gap_s: float = 0.15,
    progress=print,
) -> dict:
    proc, url = start_serve(*flags)
    lsp = None
    try:
        lsp = LspServer(url) if set(cases) & set(LSP_CASES) else None
        rows = []
        for run_no, case in enumerate(cases):
            people = lambda: run_case(url, case, slices, max_tokens, gap_s, run_no)  # noqa: E731
            rows.append(run_lsp_case(lsp, case, people) if case in LSP_CASES else people())
            rss = rss_bytes(proc.pid)
            rows[-1]["server_rss_mb"] = None if rss is None else round(rss / 1e6, 1)
            progress(json.dumps(rows[-1]))
            if proc.poll() is not None:
                raise RuntimeError(f"fimgate serve exited during {case!r}")
    finally:
        if lsp is not None:
            lsp.stop()
        proc.terminate()
        proc.wait(timeout=30)
    refs = [r["ttft_ms"]["p99"] for r in rows if r["case"] == "none"]
    base = max(refs) if refs else None  # "none" runs first and last: the larger is the reference
    for r in rows:
        p99 = r["ttft_ms"]["p99"]
        r["p99_vs_none"] = round(p99 / base, 2) if base and p99 not in (None, float("inf")) else None
    return {
        "server_flags": flags,
        "people": len(slices),
        "requests_per_person": len(slices[0]) if slices else 0,
        "max_tokens": max_tokens,
        "gap_s": gap_s,
        "cases": rows,
    }
