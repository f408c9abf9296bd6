#!/usr/bin/env bash
# On a lent GPU machine (its image has python3 with torch + triton + pytest): the kernel tests
# against the torch reference, then kernel-vs-reference timings. One call, a few minutes.
set -u
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -m pytest -q -p no:cacheprovider tests/unit/test_rope_triton.py tests/unit/test_rope.py 2>&1 | tail -15
python3 bench/gpu_rope_timing.py
