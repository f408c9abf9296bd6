"""Benchmarks: they drive the same planner and backend the server runs, strategies and peers side by
side in one run. One folder per command, each `__init__` saying what it holds:

    replay/     `bench replay`, `bench prefill`: keystroke traces through the service
    quality/    `bench quality`, `bench shape`: what the suggestions are worth
    editor/     `bench editor` (real VS Code), `bench lsp` (protocol level)
    engine/     `bench engine`: one engine's speed, batches, busy cores; the GPU check
    abuse/      `bench abuse`: people beside a hostile client (HTTP and LSP over TCP)
    peers/      what fimgate is compared with (llama.cpp, llama.vscode's requests, vLLM)
    workloads/  what is replayed (traces, office schedules, HumanEval, repository holes)
    micro/      one kernel or step, A/B in one process (`python -m fimgate.bench.micro.NAME`)
    common/     what they share (checkout paths, memory, plots, paired intervals, similarity)

cli.py holds the subcommands' flags, commands.py what each runs. May import anything in fimgate;
nothing in fimgate imports bench except the CLI.
"""
