"""The benchmarks' figures: replay (TTFT CDF per strategy, prefilled tokens per request) and
editor (keystroke -> ghost text CDF per client)."""

from __future__ import annotations


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_replay(per_strategy: dict[str, list], path: str, title: str = "") -> None:
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, outcomes in per_strategy.items():
        ttft = sorted(o.ttft_ms for o in outcomes if o.ttft_ms is not None)
        if ttft:
            ax1.plot(ttft, [(i + 1) / len(ttft) for i in range(len(ttft))], label=name)
        pre = [o.prefilled for o in outcomes if not o.dropped]
        ax2.plot(range(len(pre)), pre, label=name, linewidth=0.7)
    ax1.set_xscale("log")
    ax1.set_xlabel("time to first token (ms, log)")
    ax1.set_ylabel("share of requests")
    ax1.axvline(100, color="grey", linestyle=":", linewidth=1)
    ax1.grid(alpha=0.3)
    ax1.legend()
    ax2.set_yscale("symlog")
    ax2.set_xlabel("requests that ran, in order")
    ax2.set_ylabel("prefilled tokens")
    ax2.grid(alpha=0.3)
    ax2.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_editor(per_client: dict[str, dict], path: str, title: str = "") -> None:
    """Keystroke -> ghost text: share of keys with a suggestion on screen within x ms, per client
    (keys with none before the next key never reach the curve's top)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, r in per_client.items():
        times = sorted(k["shown_ms"] for k in r["per_key"] if k["shown_ms"] is not None)
        n = len(r["per_key"])
        ax.step([0, *times], [0, *[(i + 1) / n for i in range(len(times))]], where="post", label=f"{name} (p50 {r['p50_ms']} ms)")
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlabel("time from the key to ghost text on screen (ms)")
    ax.set_ylabel("share of keys")
    ax.axvline(150, color="grey", linestyle=":", linewidth=1)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
