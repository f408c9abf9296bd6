"""Build the service a command needs: the backend (embedded engine or vLLM servers), its FIM
template, and the planner."""
from __future__ import annotations

from fimgate.backend.embedded.engine import EmbeddedEngine, EngineConfig
from fimgate.backend.model.bundled import resolve_model
from fimgate.efim.planner import EfimPlanner
from fimgate.efim.templates import TEMPLATES, template_for_model
from fimgate.efim.window import WindowConfig
from fimgate.gateway.service import CompletionService


def build_backend(model: str | None = None, engine: EngineConfig = EngineConfig(), vllm=None, salts=None):
    """The embedded engine on `model`, or (vllm: a VllmConfig) vLLM servers, with `model` as the
    tokenizer the planner uses - it must be the model the servers serve."""
    path = resolve_model(model)
    if vllm is None:
        return EmbeddedEngine.from_path(path, engine)
    from fimgate.backend.model.weights import load_tokenizer
    from fimgate.backend.vllm.backend import VllmBackend

    return VllmBackend(vllm, load_tokenizer(path), salts)


CORRECTION_SHARE = 0.15  # the default recompute share: README, "Suffix-KV correction as served"


def build_service(model: str | None = None, template: str | None = None, engine: EngineConfig = EngineConfig(),
                  window: WindowConfig = WindowConfig(), vllm=None, salts=None,
                  correction: float | None = CORRECTION_SHARE) -> CompletionService:
    """correction: the share of shifted tokens recomputed on a re-anchor (None: exact classes
    only). vLLM cannot place KV at a shifted position, so there it is always None."""
    if template is not None and template not in TEMPLATES:
        raise ValueError(f"unknown template {template!r}; known: {', '.join(TEMPLATES)}")
    if correction is not None and not 0 <= correction <= 1:
        raise ValueError(f"--correction is a share of the shifted tokens, in [0, 1], not {correction}")
    backend = build_backend(model, engine, vllm, salts)
    tmpl = TEMPLATES[template] if template else template_for_model(backend.model_name)
    share = None if vllm is not None else correction
    return CompletionService(backend, EfimPlanner(backend.tokenizer, tmpl, window, recompute_share=share))
