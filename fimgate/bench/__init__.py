"""Benchmarks: they drive the same planner and backend the server runs, strategies and peers side by
side in one run. Here: `replay` (keystroke traces), `quality` (HumanEval infilling), `prefill_count`,
`engine_speed`, the strategies and their summaries. Subpackages: `workloads/` (what is replayed),
`peers/` (what fimgate is compared with), `micro/` (one kernel or step, A/B in one process).
May import anything in fimgate; nothing in fimgate imports bench except the CLI.
"""
