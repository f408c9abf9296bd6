"""Memory of `fimgate lsp` on the default model, as an editor drives it: keystrokes of a real trace
(protocol level, fimgate/bench/editor/lsp.py), the server's resident memory sampled after every
key. It must stay within 1.5x the GGUF file plus the KV memory the engine is configured for: the
process was killed by the kernel's OOM killer at 23.9 GB three minutes into 250 keys (fp32 copies
of every weight, bf16 copies beside them, a KV pool written in 2 MiB pages, a healing memo sized
for a 49k vocabulary holding lists of Qwen's 152k)."""

import os

from fimgate.backend.embedded.engine import EngineConfig
from fimgate.backend.model.config import ModelConfig
from fimgate.backend.model.gguf_file import GGUFFile
from fimgate.backend.model.registry import resolve_model
from fimgate.bench.editor.lsp import bench_lsp
from fimgate.bench.editor.vscode import trace_slice
from fimgate.bench.workloads.trace import read_events
from tests.conftest import SHARED

KEYS = 120


def test_lsp_memory_on_the_default_model_stays_within_its_bound():
    trace = os.path.join(SHARED, "traces", "flask-60.jsonl")
    if not os.path.exists(trace):
        from tests.conftest import HEAD_TRACE as trace
    path = resolve_model(None)
    gguf = GGUFFile(path)  # metadata only: the model's shape decides its KV bytes
    model = ModelConfig.from_gguf(gguf.fields, {t.name for t in gguf.tensors})
    engine = EngineConfig()
    kv_tokens = engine.budget_tokens + engine.num_slots * min(engine.max_context, model.max_position)
    bound = 1.5 * os.path.getsize(path) + kv_tokens * model.kv_bytes_per_token
    result = bench_lsp(trace_slice(read_events(trace), KEYS), [], {})
    rss = result["server_rss_mb"]
    assert rss["max"] * 1e6 <= bound, (rss, bound / 1e6)
    assert result["shown_share"] > 0.5  # and it was answering meanwhile
