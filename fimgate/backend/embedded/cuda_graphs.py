"""One-token decode steps replayed from CUDA graphs.

On a GPU, a small model's decode step is mostly Python and kernel launches: SmolLM2-135M on an
H200 spends ~2.9 ms of GPU time in a step that takes ~12 ms (fimgate/bench/micro/gpu_engine.py profiles one).
A CUDA graph records the step's ~600 launches once and replays them with one call.

A graph needs fixed shapes and no host synchronisation, so a captured step
(`LlamaModel.forward(..., static_kv_len=B)`) attends over a bucket of B KV rows, B the smallest
of a few sizes above the position (`bucket_for`), under a mask that hides rows past the position (and
outside a sliding window). Each (KV buffer, bucket) pair has its own graph, captured on first use
or up front by `capture_all`. The graph reads the token and position from two device tensors it
owns, writes the step's K/V row into the buffer, and leaves logits in a tensor it owns: read
them before the next replay.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fimgate.backend.model.llama import KVBuffer, LlamaModel

MIN_BUCKET = 128


def bucket_for(position: int, capacity: int) -> int:
    """The smallest bucket above `position`: 128, 192, 256, 384, 512, ... (powers of two and
    1.5x them, so a step attends over at most 1.5x the rows it needs), capped by the capacity."""
    b = MIN_BUCKET
    while b <= position:
        b = b * 3 // 2 if b & (b - 1) == 0 else b * 4 // 3
    return min(b, capacity)


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    ids: torch.Tensor
    pos: torch.Tensor
    logits: torch.Tensor


class GraphedDecoder:
    def __init__(self, model: LlamaModel) -> None:
        if model.device.type != "cuda":
            raise ValueError("CUDA graphs need the model on a CUDA device")
        self.model = model
        self._graphs: dict[tuple[int, int], _Graph] = {}

    def step(self, token: int, position: int, kv: KVBuffer) -> torch.Tensor:
        """Logits (vocab,) after `token` at `position`; rows [0, position) of `kv` must hold the context."""
        if position >= kv.capacity:
            raise ValueError(f"position {position} is past the KV buffer ({kv.capacity} rows)")
        g = self._graph(kv, bucket_for(position, kv.capacity), token, position)
        g.ids.fill_(token)
        g.pos.fill_(position)
        g.graph.replay()
        return g.logits

    def capture_all(self, kv: KVBuffer) -> None:
        """Capture every bucket of `kv` now, so no request pays a capture. Only for a buffer holding
        nothing yet: capturing runs the step, which writes a K/V row."""
        position = 0
        while True:
            bucket = bucket_for(position, kv.capacity)
            self._graph(kv, bucket, 0, bucket - 1)
            if bucket == kv.capacity:
                return
            position = bucket

    @property
    def num_graphs(self) -> int:
        return len(self._graphs)

    def _graph(self, kv: KVBuffer, bucket: int, token: int, position: int) -> _Graph:
        key = (kv.k.data_ptr(), bucket)
        g = self._graphs.get(key)
        if g is not None:
            return g
        dev = self.model.device
        ids = torch.full((1,), token, dtype=torch.long, device=dev)
        pos = torch.full((1,), position, dtype=torch.long, device=dev)
        # warm up on a side stream (Triton compiles, cuBLAS picks kernels); each run writes this
        # step's own K/V row, as the replay will
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(2):
                self.model.forward(ids, pos, kv, static_kv_len=bucket)
        torch.cuda.current_stream(dev).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits = self.model.forward(ids, pos, kv, static_kv_len=bucket)
        g = self._graphs[key] = _Graph(graph, ids, pos, logits)
        return g
