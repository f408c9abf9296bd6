"""The replay figure: time-to-first-token CDF per strategy, and prefilled tokens per request."""

from __future__ import annotations


def plot_replay(per_strategy: dict[str, list], path: str, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
