"""Build the service a command needs: load the model, pick its FIM template, make the planner."""
from __future__ import annotations

from backend.bundled import resolve_model
from backend.engine import EmbeddedEngine, EngineConfig
from efim.planner import EfimPlanner
from efim.templates import TEMPLATES, template_for_model
from efim.window import WindowConfig
from gateway.service import CompletionService


def build_service(model: str | None = None, template: str | None = None, engine: EngineConfig = EngineConfig(),
                  window: WindowConfig = WindowConfig()) -> CompletionService:
    path = resolve_model(model)
    backend = EmbeddedEngine.from_path(path, engine)
    if template is not None and template not in TEMPLATES:
        raise ValueError(f"unknown template {template!r}; known: {', '.join(TEMPLATES)}")
    tmpl = TEMPLATES[template] if template else template_for_model(backend.model_name)
    return CompletionService(backend, EfimPlanner(backend.tokenizer, tmpl, window))
