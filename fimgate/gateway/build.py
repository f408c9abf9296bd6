"""What a served path runs, as one typed object, and the service built from it.

`ServiceConfig` is built once - from the command's flags and the environment by fimgate/flags.py,
or directly by a caller - and validated where it is built; `build_service(config)` loads the backend
(the embedded engine or vLLM servers), its FIM template and the planner. `serve`, `lsp` and
`complete` all go through it, so they run the same thing for the same flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fimgate.backend.embedded.engine import EmbeddedEngine, EngineConfig
from fimgate.backend.model.registry import resolve_model
from fimgate.efim.planner import EfimPlanner
from fimgate.efim.templates import TEMPLATES, template_for_model
from fimgate.efim.window import WindowConfig
from fimgate.gateway.first_window import FirstWindow, short_window
from fimgate.gateway.request_log import RequestLog
from fimgate.gateway.service import CompletionService

if TYPE_CHECKING:
    from fimgate.backend.vllm.backend import VllmConfig
    from fimgate.backend.vllm.cache_salt import CacheSalts

CORRECTION_SHARE = 0.15  # the default recompute share: docs/benchmarks.md, bench quality (correction after an edit above)


@dataclass(frozen=True)
class ServiceConfig:
    model: str | None = None  # a GGUF file or HF folder; None: the bundled model (with vLLM: the tokenizer)
    template: str | None = None  # None: from the model's name
    engine: EngineConfig = field(default_factory=EngineConfig)
    window: WindowConfig = field(default_factory=WindowConfig)
    vllm: VllmConfig | None = None  # serve from vLLM servers instead of the embedded engine
    salts: CacheSalts | None = None  # their per-tenant cache salts
    correction: float | None = CORRECTION_SHARE  # share of shifted tokens recomputed on a re-anchor; None: exact only
    request_timeout_s: float | None = None  # a request still queued or running then is cancelled
    type_through: bool = True  # gateway/type_through.py
    request_log: str | None = None  # a file: a JSON line per request (gateway/request_log.py)
    first_window_tokens: int = 0  # gateway/first_window.py: its prefix budget; 0: off (serve, lsp: first_window.TOKENS)

    def __post_init__(self) -> None:
        if self.template is not None and self.template not in TEMPLATES:
            raise ValueError(f"unknown template {self.template!r}; known: {', '.join(TEMPLATES)}")
        if self.correction is not None and not 0 <= self.correction <= 1:
            raise ValueError(f"--correction is a share of the shifted tokens, in [0, 1], not {self.correction}")
        if self.first_window_tokens < 0:
            raise ValueError("--first-window-tokens must be >= 0 (0: off)")
        if self.vllm is not None and self.correction is not None:
            # vLLM cannot place KV at a shifted position: there the exact classes are all there is
            object.__setattr__(self, "correction", None)


def build_backend(config: ServiceConfig):
    """The embedded engine on `config.model`, or vLLM servers with `config.model` as the tokenizer
    the planner uses - it must be the model the servers serve."""
    path = resolve_model(config.model)
    if config.vllm is None:
        return EmbeddedEngine.from_path(path, config.engine)
    from fimgate.backend.model.weights import load_tokenizer
    from fimgate.backend.vllm.backend import VllmBackend

    return VllmBackend(config.vllm, load_tokenizer(path), config.salts)


def build_service(config: ServiceConfig = ServiceConfig()) -> CompletionService:
    return service_on(build_backend(config), config)


def service_on(backend, config: ServiceConfig) -> CompletionService:
    """The service `config` describes, on a backend already loaded (benchmarks run several on one)."""
    template = TEMPLATES[config.template] if config.template else template_for_model(backend.model_name)
    planner = EfimPlanner(backend.tokenizer, template, config.window, recompute_share=config.correction)
    log = RequestLog(config.request_log) if config.request_log else None
    first = None
    if config.first_window_tokens and hasattr(backend, "uncached_tokens"):
        window = short_window(config.first_window_tokens)
        first = FirstWindow(backend, EfimPlanner(backend.tokenizer, template, window, recompute_share=config.correction))
    return CompletionService(
        backend,
        planner,
        request_timeout_s=config.request_timeout_s,
        type_through=config.type_through,
        request_log=log,
        first_window=first,
    )
