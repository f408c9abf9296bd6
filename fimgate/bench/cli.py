"""`fimgate bench ...`: the benchmark subcommands' flags. The CLI's dispatcher (fimgate/cli.py) adds
them with add_parsers(); what each runs is in bench/commands.py and bench/replay/command.py."""

from __future__ import annotations

from fimgate.bench.commands import (
    cmd_bench_abuse,
    cmd_bench_editor,
    cmd_bench_engine,
    cmd_bench_lsp,
    cmd_bench_make_trace,
    cmd_bench_prefill,
    cmd_bench_quality,
    cmd_bench_shape,
)
from fimgate.bench.replay.command import cmd_bench_replay
from fimgate.flags import backend_args, engine_args


def add_parsers(b) -> None:
    """The bench subcommands, on the `bench` subparsers `b`."""
    s = b.add_parser("prefill", help="token-level prefill per request: PSM + prefix caching vs the EFIM planner")
    s.add_argument("trace")
    s.add_argument("--model", default=None)
    s.add_argument("--template", default=None)
    s.add_argument("--debounce-ms", type=float, default=150.0)
    s.add_argument("--limit-requests", type=int, default=None)
    s.add_argument("--step-lines", type=int, default=64)
    s.add_argument("--json", default=None, help="also write the result to this file")
    s.set_defaults(func=cmd_bench_prefill)

    s = b.add_parser("replay", help="replay a keystroke trace, strategies side by side")
    engine_args(s)
    backend_args(s)
    s.add_argument("trace")
    s.add_argument("--strategies", default="no-cache,psm-prefix,efim")
    s.add_argument("--debounce-ms", type=float, default=150.0)
    s.add_argument("--limit-requests", type=int, default=None)
    s.add_argument("--users", type=int, default=1)
    s.add_argument(
        "--time-scale", type=float, default=1.0, help="stretch the trace's gaps (many simulated people on one small engine)"
    )
    s.add_argument("--max-tokens", type=int, default=48, help="tokens asked per request (the VS Code extension asks 48)")
    s.add_argument("--prewarm", action="store_true", help="warm the cache when a file opens or the cursor jumps")
    s.add_argument(
        "--context-chars",
        type=int,
        default=None,
        help="send the context the VS Code extension would (its ring of chunks from files left; it sends 3000); "
        "default 0, with --accepting 3000",
    )
    s.add_argument(
        "--schedule",
        choices=["consecutive", "office"],
        default="consecutive",
        help="consecutive: person k types the k-th slice of the trace from t=0; office: people type a "
        "file's session, then read (fimgate/bench/workloads/office.py)",
    )
    s.add_argument("--think-s", default="30,90", help="office: reading pause between sessions, seconds (range)")
    s.add_argument("--reads", type=int, default=1, help="office: other files opened (pre-warmed) per pause")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument(
        "--typing-first", action="store_true", help="typing requests go before queued warm-ups, which prefill in 64-token chunks"
    )
    s.add_argument(
        "--warmup-yield-ms",
        type=float,
        default=None,
        help="--serial: warm-ups in 64-token chunks, yielding to typing for this long, then in arrival order "
        "(default: FIFO, warm-ups whole)",
    )
    s.add_argument(
        "--serial",
        action="store_true",
        help="one request at a time on a simulated clock (peers always run so); default for the embedded engine: "
        "requests together on its batching scheduler, as serve runs them (fimgate/bench/replay/batched.py)",
    )
    s.add_argument("--pin-policy", default="pin", help="none, lru-only, pin, random+pin; several (comma) compare them")
    s.add_argument("--live", default=None, metavar="URL", help="replay in real time against a running gateway")
    s.add_argument(
        "--background", type=int, default=0, metavar="N", help="N busy loops run beside the engine (other processes' load)"
    )
    s.add_argument("--plot", default=None, metavar="OUT.png")
    s.add_argument(
        "--dump-outcomes",
        default=None,
        metavar="OUT.jsonl",
        help="write every request's outcome (one JSON line each, with its strategy label)",
    )
    s.add_argument(
        "--peers",
        default=None,
        metavar="llama.cpp,llama-server,vllm",
        help="also replay no-cache/psm-prefix/efim/llama.vscode on these engines (llama-server: llama.vscode's "
        "requests over HTTP; fimgate/bench/peers/registry.py)",
    )
    s.add_argument(
        "--speculate-each",
        default=None,
        metavar="N,N",
        help="run every strategy under each of these --speculate settings, e.g. 4,0 (the A/B of speculative decoding)",
    )
    s.add_argument(
        "--hint-sessions",
        type=int,
        default=4,
        help="how many of a person's other files' last prompts a re-anchor or a cold start may reuse text from "
        "(fimgate/efim/planner.py; 0: the file's own previous prompt only; the A/B switch)",
    )
    s.add_argument(
        "--peer-strategies",
        default=None,
        help="what the peers run (default: those of --strategies a peer can run), e.g. llama.vscode: "
        "llama.vscode's own requests (fimgate/bench/peers/llama_vscode.py)",
    )
    s.add_argument(
        "--peer-prewarm",
        choices=["same", "none"],
        default="same",
        help="none: peers get the typing requests only, as a server nobody pre-warms (with --prewarm)",
    )
    g = s.add_argument_group("the accepting typist (--accepting: fimgate/bench/typist/)")
    g.add_argument(
        "--accepting",
        action="store_true",
        help="a person who types the trace with its gaps and takes right suggestions: characters not typed and "
        "time saved per client, beside the model's zero-latency ceiling",
    )
    g.add_argument("--keys", type=int, default=250, help="keys typed from the trace's start (bench editor's slice)")
    g.add_argument("--reaction-ms", default="300,0", help="how long ghost text is on screen before it is taken")
    g.add_argument(
        "--clients", default="fimgate,ceiling", help="fimgate, ceiling, llama.vscode@llama-server, llama.vscode-1@llama-server"
    )
    g.add_argument("--floors", default="0.6", help="fimgate's probability floor (minTokenProb) per variant, e.g. 0.6,0.3,0")
    g.add_argument("--multiline", default="auto", help="fimgate's multi-line policy per variant: auto, off, on")
    s.add_argument("--json", default=None)
    s.set_defaults(func=cmd_bench_replay)

    s = b.add_parser("make-trace", help="build a keystroke trace from a git repository's history")
    s.add_argument("--repo", required=True)
    s.add_argument("--commits", type=int, default=60)
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--suffixes", default=None, help="only files ending so, comma-separated (e.g. .py); default: text files")
    s.set_defaults(func=cmd_bench_make_trace)

    s = b.add_parser(
        "quality", help="HumanEval infilling, or holes from a repository's history (--dataset repo): quality per strategy"
    )
    engine_args(s)
    s.add_argument(
        "--dataset",
        choices=["single-line", "multi-line", "mid-line", "real-mid-line", "repo"],
        default="single-line",
        help="HumanEval infilling; mid-line: its single-line holes with the line half typed (the hole starts mid-line); "
        "real-mid-line: lines of real files half typed, from --sources (exact match and edit similarity)",
    )
    s.add_argument(
        "--sources",
        default=None,
        help="--dataset real-mid-line: folders of source files, one a language "
        "(`python -m fimgate.bench.workloads.real_sources out/sources` makes them: give out/sources)",
    )
    s.add_argument("--limit", type=int, default=None, help="problems, spread evenly over the set (repo: holes, default 30)")
    s.add_argument(
        "--strategies",
        default=None,
        help="default no-cache,efim; for --dataset repo: rows of fimgate/bench/quality/repo.py "
        "(default no-context,context,reuse-add,reuse-add-visited,reuse-drop,reuse-reorder; reuse rows take :SHARE)",
    )
    s.add_argument(
        "--repo", default=None, help="--dataset repo: a git repository or bundle (default ../shared/repos/flask-301.bundle)"
    )
    s.add_argument("--context-chars", type=int, default=3000, help="--dataset repo: the context budget, as the extension's")
    s.add_argument(
        "--perturb", choices=["edit-above"], default=None, help="cache the file, then insert a line above the hole before asking"
    )
    s.add_argument("--max-tokens", type=int, default=128)
    s.add_argument("--data-dir", default=None)
    s.add_argument(
        "--compare-dtype",
        choices=["auto", "float32", "bfloat16", "int8"],
        default=None,
        help="run again with this --dtype and report the share of identical completions",
    )
    s.add_argument(
        "--compare-prefill-dtype",
        choices=["float32", "bfloat16"],
        default=None,
        help="run again with this --prefill-dtype (and --compare-dtype, if given)",
    )
    s.add_argument(
        "--compare-step-dtype",
        choices=["auto", "float32", "bfloat16"],
        default=None,
        help="run again with this --step-dtype (and the other --compare-*, if given)",
    )
    s.add_argument(
        "--peers",
        default=None,
        metavar="llama.cpp,vllm",
        help="run no-cache/efim on these engines too, with the share of completions identical to fimgate's",
    )
    s.add_argument("--json", default=None)
    s.set_defaults(func=cmd_bench_quality)

    s = b.add_parser("engine", help="prefill and decode speed, and a 1-token append on a cached prompt")
    engine_args(s)
    backend_args(s)
    s.add_argument("--prefill-tokens", type=int, default=1000)
    s.add_argument("--cached-tokens", type=int, default=2000)
    s.add_argument(
        "--background",
        default=None,
        metavar="0,1,2",
        help="instead: beside this many busy loops each, threads per request vs fixed (fimgate/bench/engine/busy_cores.py)",
    )
    s.add_argument(
        "--peers", default=None, metavar="llama.cpp,vllm", help="measure these engines too (fimgate/bench/peers/registry.py)"
    )
    s.add_argument(
        "--batch",
        default=None,
        metavar="1,2,4,8",
        help="instead: aggregate decode tokens/s with this many people decoding at once (fimgate/bench/engine/batch_decode.py)",
    )
    s.add_argument("--batch-tokens", type=int, default=64, help="with --batch: tokens each person decodes")
    s.add_argument("--json", default=None)
    # a step's raw speed, as the peers' (they do not speculate); `bench replay --speculate-each` measures drafts
    s.set_defaults(func=cmd_bench_engine, speculate=0)

    s = b.add_parser("shape", help="suggestions at block-opening lines of real files, per language, rules before/after")
    engine_args(s)
    s.add_argument("paths", nargs="+", help="source files or folders (searched for known languages)")
    s.add_argument("--per-language", type=int, default=30, help="holes per language and kind")
    s.add_argument("--max-tokens", type=int, default=48)
    s.add_argument(
        "--kinds", default="end-of-line,blank-line,next-line", help="hole kinds to run (the same holes are picked either way)"
    )
    s.add_argument("--json", default=None)
    s.set_defaults(func=cmd_bench_shape)

    s = b.add_parser("editor", help="keystrokes of a trace typed into real VS Code: key -> ghost text, per client")
    s.add_argument("trace", nargs="?", default=None, help="keystroke trace (default: ../shared/traces/flask-60.jsonl)")
    s.add_argument("--keys", type=int, default=250, help="single-character keystrokes to type (from the trace's start)")
    s.add_argument(
        "--clients",
        default="fimgate-before,fimgate,llama.vscode",
        help="extensions, one after another, each against fimgate serve or CLIENT@llama-server "
        "(e.g. fimgate,llama.vscode@llama-server,llama.vscode-1@llama-server; fimgate/bench/editor/vscode.py)",
    )
    s.add_argument("--serve-flags", default="", help="flags for the fimgate serve under test")
    s.add_argument("--json", default=None, help="results; the server's request log goes beside it (.requests.jsonl)")
    s.add_argument("--plot", default=None, metavar="OUT.png")
    s.add_argument(
        "--accepting",
        action="store_true",
        help="the accepting typist: takes right suggestions (Tab, accept-word); characters not typed and time saved, "
        "beside the zero-latency ceiling of the model serve runs",
    )
    s.add_argument("--reaction-ms", default="300", help="with --accepting: ghost text on screen this long before a Tab")
    s.set_defaults(func=cmd_bench_editor)

    s = b.add_parser("lsp", help="the same keystrokes to `fimgate lsp` over the protocol: key -> inline completion answer")
    s.add_argument("trace", nargs="?", default=None, help="keystroke trace (default: ../shared/traces/flask-60.jsonl)")
    s.add_argument("--keys", type=int, default=250, help="single-character keystrokes to type (from the trace's start)")
    s.add_argument(
        "--settings",
        default="{}",
        help='JSON settings sent as initializationOptions, one run each: \'{}\' (defaults) or a list \'[{}, {"debounceMs": 0}]\'',
    )
    s.add_argument("--lsp-flags", default="", help="flags for the fimgate lsp under test (engine flags, --gateway URL)")
    s.add_argument(
        "--client-delay-ms",
        type=float,
        default=0.0,
        help="the editor's own wait after a key before it asks (VS Code: 50); time still counts from the key",
    )
    s.add_argument("--json", default=None)
    s.set_defaults(func=cmd_bench_lsp)

    s = b.add_parser("abuse", help="people's time to first token beside one abusive client, per abuse case")
    s.add_argument("trace", nargs="?", default=None, help="keystroke trace (default: the committed flask-60 head)")
    s.add_argument("--users", type=int, default=2, help="people typing at once")
    s.add_argument("--requests", type=int, default=30, help="requests per person")
    s.add_argument(
        "--cases",
        default=None,
        help="abuse cases, comma-separated (default: 'none', the reference "
        "run, every case, then 'none' again: fimgate/bench/abuse/cases.py)",
    )
    s.add_argument("--serve-flags", default="", help="flags for the fimgate serve under test, e.g. '--dtype int8'")
    s.add_argument("--json", default=None)
    s.set_defaults(func=cmd_bench_abuse)
