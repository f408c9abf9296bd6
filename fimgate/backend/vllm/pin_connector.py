"""Keystroke-aware pins inside vLLM: a KV-connector plugin that holds a typing session's blocks.

Loaded by the vLLM server, not by fimgate (this module imports vLLM and runs in its process):

    PYTHONPATH=/path/to/fimgate python -m vllm.entrypoints.openai.api_server ... \\
      --kv-transfer-config '{"kv_connector": "KeystrokePinConnector",
                             "kv_connector_module_path": "fimgate.backend.vllm.pin_connector",
                             "kv_role": "kv_both",
                             "kv_connector_extra_config": {"pin_cap_share": 0.5}}'

The gateway asks for a pin on each typing request with
`kv_transfer_params = {"fimgate_pin": {"key": K, "tokens": N, "ttl_s": T}}`: when that request
finishes, the blocks holding its first N prompt tokens get one more reference in vLLM's block
pool (`BlockPool.touch`), so LRU eviction cannot take them while other users' traffic flows.
The previous pin of the same key is released (`BlockPool.free_blocks`) - a person's pin moves
with them, re-anchors included. A pin also ends when its TTL passes without a new request (the
gateway sets the TTL from the person's own keystroke gaps), and the oldest pins are released
first when pinned blocks would pass `pin_cap_share` of the pool. Everything happens on the
scheduler side; the worker side of the connector does nothing. No KV moves anywhere.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole
from vllm.logger import init_logger

if TYPE_CHECKING:
    from vllm.v1.core.block_pool import BlockPool
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request

logger = init_logger(__name__)
PARAM = "fimgate_pin"


class _NoMetadata(KVConnectorMetadata):
    pass


@dataclass
class _Pin:
    block_ids: list[int]
    expires_at: float


class KeystrokePinConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role: KVConnectorRole, kv_cache_config=None) -> None:
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        extra = self._kv_transfer_config.kv_connector_extra_config
        self.cap_share = float(extra.get("pin_cap_share", 0.5))
        self.block_size = vllm_config.cache_config.block_size
        self.pool: BlockPool | None = None
        self.pins: OrderedDict[str, _Pin] = OrderedDict()  # oldest first
        self.num_pinned = 0
        self.clock = time.monotonic

    @property
    def requires_kv_delivery(self) -> bool:
        return False  # nothing is handed off: a pin lost to preemption is just a future miss

    # -- scheduler side ----------------------------------------------------------------
    def bind_gpu_block_pool(self, gpu_block_pool: "BlockPool") -> None:
        self.pool = gpu_block_pool

    def get_num_new_matched_tokens(self, request: "Request", num_computed_tokens: int) -> tuple[int, bool]:
        self._expire()
        return 0, False

    def update_state_after_alloc(self, request: "Request", blocks: "KVCacheBlocks", num_external_tokens: int) -> None:
        return None

    def build_connector_meta(self, scheduler_output: "SchedulerOutput") -> KVConnectorMetadata:
        self._expire()
        return _NoMetadata()

    def request_finished(self, request: "Request", block_ids: list[int]) -> tuple[bool, dict[str, Any] | None]:
        params = (request.kv_transfer_params or {}).get(PARAM)
        if not params or self.pool is None:
            return False, None
        key = str(params["key"])
        self._release(key)
        tokens = min(int(params.get("tokens", 0)), request.num_computed_tokens, request.num_prompt_tokens)
        ids = [b for b in block_ids[: tokens // self.block_size] if b != self.pool.null_block.block_id]
        cap = int(self.cap_share * self.pool.num_gpu_blocks)
        if not ids or len(ids) > cap:
            return False, {PARAM: {"pinned_blocks": 0}}
        while self.num_pinned + len(ids) > cap and self.pins:
            self._release(next(iter(self.pins)))
        self.pool.touch([self.pool.blocks[b] for b in ids])
        self.pins[key] = _Pin(ids, self.clock() + float(params.get("ttl_s", 10.0)))
        self.num_pinned += len(ids)
        return False, {PARAM: {"pinned_blocks": len(ids)}}

    def _release(self, key: str) -> None:
        pin = self.pins.pop(key, None)
        if pin is not None:
            self.pool.free_blocks([self.pool.blocks[b] for b in pin.block_ids])
            self.num_pinned -= len(pin.block_ids)

    def _expire(self) -> None:
        now = self.clock()
        for key in [k for k, p in self.pins.items() if p.expires_at <= now]:
            self._release(key)

    # -- worker side: nothing moves --------------------------------------------------------
    def start_load_kv(self, forward_context, **kwargs) -> None:
        return None

    def wait_for_layer_load(self, layer_name: str) -> None:
        return None

    def save_kv_layer(self, layer_name: str, kv_layer, attn_metadata, **kwargs) -> None:
        return None

    def wait_for_save(self) -> None:
        return None
