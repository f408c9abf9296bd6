"""The `fimgate` settings section an editor sends (initializationOptions or
workspace/didChangeConfiguration), with defaults and bounds."""

from __future__ import annotations

from dataclasses import dataclass, replace

TCP_LOCKED = frozenset({"gateway", "model", "user"})  # over TCP: the command line's and the token's


@dataclass(frozen=True)
class LspSettings:
    gateway: str | None = None  # http://127.0.0.1:8418 to use a running gateway; None: embedded backend
    model: str | None = None  # embedded only: a model name, GGUF file or HF folder (default: the default model)
    debounce_ms: int = 0  # the gateway cancels a superseded request anyway (bench lsp: 0 answers more keys, sooner)
    max_tokens: int = 48
    multiline: bool = False
    timeout_ms: int = 5000  # past this the editor gets no suggestion rather than a wait
    max_predict_ms: int = 200  # once this long after the first token, end at the next complete line (0: no budget)
    min_token_prob: float = 0.6  # end before a token the model gives less than this probability (0: never; docs/benchmarks.md)
    user: str = "local"
    context_chars: int = 3000  # other open documents' text around their last edit, shown before this one (0: none)
    context_exclude: tuple[str, ...] = ()  # globs of documents never used as context nor completed in (besides secrets)
    follow_in_flight: bool = True  # keys typed along a suggestion in flight wait for it (fimgate/lsp/inflight.py)

    def update(self, raw: dict | None, locked: frozenset[str] = frozenset()) -> "LspSettings":
        """Apply a client's settings; unknown keys are ignored, bad values keep the old ones, and
        `locked` ones (over TCP: gateway, model, user) are not the client's to change."""
        if not isinstance(raw, dict):
            return self
        raw = raw.get("fimgate", raw)
        if not isinstance(raw, dict):
            return self
        out = self
        keys = {
            "gateway": "gateway",
            "model": "model",
            "debounceMs": "debounce_ms",
            "maxTokens": "max_tokens",
            "multiline": "multiline",
            "timeoutMs": "timeout_ms",
            "maxPredictMs": "max_predict_ms",
            "minTokenProb": "min_token_prob",
            "user": "user",
            "contextChars": "context_chars",
            "contextExclude": "context_exclude",
            "followInFlight": "follow_in_flight",
        }
        for key, attr in keys.items():
            if key not in raw or attr in locked:
                continue
            value = raw[key]
            current = getattr(out, attr)
            if attr in ("gateway", "model"):
                ok = value is None or isinstance(value, str)
                value = value or None
            elif isinstance(current, tuple):
                ok = isinstance(value, list) and len(value) <= 256 and all(isinstance(g, str) and len(g) <= 256 for g in value)
                value = tuple(value) if ok else current
            elif isinstance(current, bool):
                ok = isinstance(value, bool)
            elif isinstance(current, float):
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1
                value = float(value) if ok else current
            elif isinstance(current, int):
                ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 100_000
            else:
                ok = isinstance(value, str) and bool(value)
            if ok:
                out = replace(out, **{attr: value})
        return out
