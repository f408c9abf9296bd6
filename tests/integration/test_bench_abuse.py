"""`fimgate bench abuse` end to end on the small model: a real `fimgate serve`, people typing over
HTTP, and the LSP-over-TCP attacks against a real `fimgate lsp --tcp` in front of it. The people
are all answered, the language server stays up for its honest client, and nothing of that client's
document reaches the attacker."""

from fimgate.bench.abuse.cases import run
from fimgate.bench.common.checkout import CHECKOUT
from fimgate.bench.workloads.trace import debounced_requests, read_events


def test_people_and_the_honest_lsp_client_are_served_beside_each_attack():
    typing = [
        r for r in debounced_requests(read_events(str(CHECKOUT / "tests" / "data" / "flask-60-head.jsonl"))) if not r.prewarm
    ]
    cases = ["none", "mint-ids", "lsp-connect-close", "lsp-unauthenticated"]
    result = run([typing[:3]], cases, ["--model", "smollm2-135m"], max_tokens=4, progress=lambda line: None)
    rows = {r["case"]: r for r in result["cases"]}
    assert set(rows) == set(cases)
    for r in rows.values():
        assert r["answered"] == r["requests"] == 3, r
        assert r["server_rss_mb"] and r["server_rss_mb"] > 0
    for case in ("lsp-connect-close", "lsp-unauthenticated"):
        lsp = rows[case]["lsp"]
        assert rows[case]["abuser_sent"] > 0
        assert lsp == {"server_up": True, "alice_answered_during": True, "alice_answered_after": True, "leaks": 0}, lsp
