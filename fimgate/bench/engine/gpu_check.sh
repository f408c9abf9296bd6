#!/usr/bin/env bash
# On a lent GPU machine (its image has python3 with torch + triton + pytest + tokenizers): the kernel
# and CUDA-engine tests against their references, kernel-vs-reference timings, then engine speed on
# CUDA with the bundled model's shape (random weights: the GGUF cannot travel). One call, ~5 minutes.
# Needs .gpu/smollm2 (here: `python -m fimgate.bench.micro.gpu_engine --write-shape .gpu/smollm2`; carry it).
# Writes its results under $OUT when set.
set -u
cd "$(dirname "$0")/../../.."  # the checkout
OUT="${OUT:-/tmp/gpu-check}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/unit/test_rope_triton.py tests/unit/test_rope.py \
    tests/unit/test_engine_cuda.py 2>&1 | tee "$OUT/tests.txt" | tail -25
timeout 90 python3 -m fimgate.bench.micro.gpu_rope_timing 2>&1 | tee "$OUT/rope_timing.json"
timeout 300 python3 -m fimgate.bench.micro.gpu_engine --shape .gpu/smollm2 --out "$OUT/engine.json" 2>&1 | tee "$OUT/engine.txt"
