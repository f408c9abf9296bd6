"""Micro-benchmarks: one kernel or one engine step, the two implementations alternated in one process
(`python -m fimgate.bench.micro.NAME`), and the GPU checks (`fimgate/bench/engine/gpu_check.sh`).
May import: anything in fimgate.
"""
