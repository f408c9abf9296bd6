"""Where the language server's completions come from: the gateway over HTTP, or the embedded
engine in-process. Both take the whole document and a code-point cursor, per (user, document)
session, so the planner sees every keystroke's document and serves EFIM appends, and both answer
with the text as shown (the gateway's CompletionService shapes and cleans it, once) and the
completion's id, which acceptance events name (the gateway's /v1/events; in-process: none).
`on_text`, when given, is called with each streamed piece as it is decided (pieces are never
taken back: their concatenation is the final text) and the completion's id, on the caller's
event loop."""

from __future__ import annotations

import asyncio
import json
from typing import Callable

import httpx

from fimgate.backend.base import CancelToken, Finished, SamplingParams, TextDelta
from fimgate.efim.planner import EditorState
from fimgate.efim.templates import ContextChunk
from fimgate.gateway.service import Shape


class HttpCompleter:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(60.0))

    async def complete(
        self,
        user: str,
        uri: str,
        text: str,
        cursor: int,
        sampling: SamplingParams,
        language: str = "",
        multiline: bool | None = None,
        context: tuple[ContextChunk, ...] = (),
        on_text: Callable[[str, str], None] | None = None,
    ) -> tuple[str, str]:
        body = {
            "prompt": text[:cursor],
            "suffix": text[cursor:],
            "max_tokens": sampling.max_tokens,
            "stop": list(sampling.stop),
            "user": user,
            "document": uri,
            "multiline": multiline,
            "max_predict_ms": sampling.max_predict_ms,
            "min_token_prob": sampling.min_token_prob,
            "input_extra": [{"filename": c.path, "text": c.text} for c in context],
            "stream": on_text is not None,
        }
        if on_text is None:
            r = await self._client.post(self.url + "/v1/completions", json=body)
            r.raise_for_status()
            out = r.json()
            return out["choices"][0]["text"], out.get("id", "")
        text, rid = "", ""
        async with self._client.stream("POST", self.url + "/v1/completions", json=body) as r:
            r.raise_for_status()
            async for line in r.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    raise RuntimeError(chunk["error"].get("message", "gateway error"))
                rid = chunk.get("id", rid)
                piece = chunk["choices"][0]["text"]
                if piece:
                    text += piece
                    on_text(piece, rid)
        return text, rid

    async def event(self, user: str, kind: str, completion_id: str, accepted_chars: int | None = None) -> None:
        body = {"type": kind, "completion_id": completion_id, "user": user, "accepted_chars": accepted_chars}
        (await self._client.post(self.url + "/v1/events", json=body)).raise_for_status()

    async def aclose(self) -> None:
        await self._client.aclose()


class EmbeddedCompleter:
    def __init__(self, model: str | None, runner=None, build=None) -> None:
        """build: model -> CompletionService (the CLI's engine flags, for the `model` setting: None
        is the CLI's); without it, the `model` setting's with the defaults."""
        from fimgate.gateway.build import ServiceConfig, build_service

        self.service = build(model) if build is not None else build_service(ServiceConfig(model=model))
        self.service.runner = runner

    async def complete(
        self,
        user: str,
        uri: str,
        text: str,
        cursor: int,
        sampling: SamplingParams,
        language: str = "",
        multiline: bool | None = None,
        context: tuple[ContextChunk, ...] = (),
        on_text: Callable[[str, str], None] | None = None,
    ) -> tuple[str, str]:
        state = EditorState(
            user_id=user,
            document_id=uri,
            text=text,
            cursor=cursor,
            path=uri.rsplit("/", 1)[-1],
            language=language,
            context=context,
        )
        events, cancel = self.service.start(state, sampling, Shape(multiline=multiline))
        loop = asyncio.get_running_loop()

        def read():
            final = None
            for ev in events:
                if isinstance(ev, TextDelta) and on_text is not None and ev.text:
                    loop.call_soon_threadsafe(on_text, ev.text, "")
                elif isinstance(ev, Finished):
                    final = ev
            return final

        try:
            final = await loop.run_in_executor(None, read)
        except asyncio.CancelledError:
            cancel.cancel()
            raise
        return ("" if final is None or final.usage.cancelled else final.text), ""

    async def event(self, user: str, kind: str, completion_id: str, accepted_chars: int | None = None) -> None:
        return None  # in-process there is no gateway to count events

    async def aclose(self) -> None:
        return None


__all__ = ["HttpCompleter", "EmbeddedCompleter", "CancelToken"]
