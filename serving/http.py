"""OpenAI-compatible HTTP front of the serving engine.

``/v1/completions`` and ``/v1/chat/completions`` (JSON or server-sent events),
``/v1/models``, ``/health`` and ``/metrics`` (Prometheus text). The engine runs in its
own thread; each request submits to it and awaits its token events on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST
from transformers import PreTrainedTokenizerBase

from engine.sampling import SamplingParams
from serving.engine import ServingEngine
from serving.openai_schema import ChatCompletionRequest, CompletionRequest, SamplingFields
from serving.requests import GenerationRequest, TokenEvent
from serving.text import TextStream

# OpenAI's default for /v1/completions; chat defaults to the rest of the context.
DEFAULT_COMPLETION_TOKENS = 16

Kind = Literal["completion", "chat"]


class OpenAIError(Exception):
    """Rendered as OpenAI's ``{"error": {...}}`` body."""

    def __init__(self, message: str, *, status_code: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.param = param

    def response(self) -> JSONResponse:
        kind = "invalid_request_error" if self.status_code < 500 else "server_error"
        body = {"error": {"message": self.message, "type": kind, "param": self.param, "code": None}}
        return JSONResponse(body, status_code=self.status_code)


@dataclass(slots=True)
class _Usage:
    prompt_tokens: int
    completion_tokens: int = 0

    def to_json(self) -> dict[str, int]:
        total = self.prompt_tokens + self.completion_tokens
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": total,
        }


@dataclass(frozen=True, slots=True)
class _Piece:
    text: str
    finish_reason: str | None  # OpenAI's: "stop" or "length" on the last piece


class _Server:
    def __init__(
        self, engine: ServingEngine, tokenizer: PreTrainedTokenizerBase, model_name: str, max_model_len: int
    ) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_model_len = max_model_len
        self.created = int(time.time())

    def prepare(
        self, body: SamplingFields, prompt_ids: list[int], max_tokens: int | None
    ) -> GenerationRequest:
        if body.model is not None and body.model != self.model_name:
            raise OpenAIError(
                f"the model '{body.model}' does not exist; this server serves '{self.model_name}'",
                status_code=404,
                param="model",
            )
        room = self.max_model_len - len(prompt_ids)
        if room < 1:
            raise OpenAIError(
                f"the prompt has {len(prompt_ids)} tokens, more than the model's context of "
                f"{self.max_model_len}",
                param="prompt",
            )
        wanted = max_tokens if max_tokens is not None else room
        if wanted > room:
            raise OpenAIError(
                f"max_tokens={wanted} plus the prompt's {len(prompt_ids)} tokens exceeds the model's "
                f"context of {self.max_model_len} tokens",
                param="max_tokens",
            )
        if not prompt_ids or any(not 0 <= t < self.engine.vocab_size for t in prompt_ids):
            raise OpenAIError(f"prompt token ids must be in 0..{self.engine.vocab_size - 1}", param="prompt")
        return GenerationRequest(
            prompt_ids=prompt_ids,
            max_new_tokens=wanted,
            sampling=SamplingParams(temperature=body.temperature, top_p=body.top_p),
            seed=body.seed,
            ignore_eos=body.ignore_eos,
        )

    def completion_prompt(self, body: CompletionRequest) -> list[int]:
        prompt = body.prompt
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
            prompt = str(prompt[0])
        if isinstance(prompt, str):
            return list(self.tokenizer.encode(prompt))
        return [int(token) for token in prompt]

    def chat_prompt(self, body: ChatCompletionRequest) -> list[int]:
        if not getattr(self.tokenizer, "chat_template", None):
            raise OpenAIError(
                "the model's tokenizer has no chat template; use /v1/completions", param="messages"
            )
        messages = [{"role": m.role, "content": m.text()} for m in body.messages]
        # transformers 5 returns a BatchEncoding here, older versions a plain list of ids.
        encoded: Any = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = encoded if isinstance(encoded, list) else encoded["input_ids"]
        return [int(token) for token in ids]

    async def pieces(
        self, request: GenerationRequest, stops: list[str], usage: _Usage
    ) -> AsyncIterator[_Piece]:
        """Text as the engine accepts tokens; the last piece carries the finish reason."""
        stream = TextStream(self.tokenizer, stops)
        async for event in self._events(request):
            if event.finish_reason in ("error", "cancelled"):
                raise OpenAIError(f"generation failed: {event.error}", status_code=500)
            usage.completion_tokens += len(event.token_ids)
            text = stream.add(event.token_ids)
            if stream.stopped:
                yield _Piece(text, "stop")
                return
            if event.finish_reason is not None:
                yield _Piece(text + stream.flush(), "stop" if event.finish_reason == "eos" else "length")
                return
            if text:
                yield _Piece(text, None)

    async def _events(self, request: GenerationRequest) -> AsyncIterator[TokenEvent]:
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[TokenEvent] = asyncio.Queue()

        def forward(event: TokenEvent) -> None:  # runs on the engine thread
            loop.call_soon_threadsafe(events.put_nowait, event)

        if self.engine.device_failure is not None:
            raise OpenAIError(self.engine.device_failure, status_code=503)
        handle = self.engine.submit(request, forward)
        try:
            while True:
                event = await events.get()
                yield event
                if event.finish_reason is not None:
                    return
        finally:
            handle.cancel()  # client gone or stop string found; no-op once finished


def _choice(kind: Kind, piece: _Piece, *, stream: bool, first: bool) -> dict[str, Any]:
    if kind == "completion":
        return {"index": 0, "text": piece.text, "logprobs": None, "finish_reason": piece.finish_reason}
    if stream:
        delta: dict[str, str] = (
            {"role": "assistant", "content": piece.text} if first else {"content": piece.text}
        )
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": piece.finish_reason}
    message = {"role": "assistant", "content": piece.text}
    return {"index": 0, "message": message, "logprobs": None, "finish_reason": piece.finish_reason}


def _envelope(server: _Server, kind: Kind, response_id: str, *, stream: bool) -> dict[str, Any]:
    objects = {
        ("completion", False): "text_completion",
        ("completion", True): "text_completion",
        ("chat", False): "chat.completion",
        ("chat", True): "chat.completion.chunk",
    }
    return {
        "id": response_id,
        "object": objects[kind, stream],
        "created": int(time.time()),
        "model": server.model_name,
    }


async def _respond(
    server: _Server, kind: Kind, body: SamplingFields, request: GenerationRequest, usage: _Usage
) -> Response:
    response_id = f"{'cmpl' if kind == 'completion' else 'chatcmpl'}-{uuid.uuid4().hex}"
    pieces = server.pieces(request, body.stop_strings(), usage)
    if not body.stream:
        texts: list[str] = []
        finish: str | None = None
        async for piece in pieces:
            texts.append(piece.text)
            finish = piece.finish_reason
        whole = _Piece("".join(texts), finish)
        payload = {
            **_envelope(server, kind, response_id, stream=False),
            "choices": [_choice(kind, whole, stream=False, first=True)],
            "usage": usage.to_json(),
        }
        return JSONResponse(payload)

    include_usage = body.stream_options is not None and body.stream_options.include_usage

    async def events() -> AsyncIterator[str]:
        first = True
        try:
            async for piece in pieces:
                chunk = {
                    **_envelope(server, kind, response_id, stream=True),
                    "choices": [_choice(kind, piece, stream=True, first=first)],
                }
                if piece.finish_reason is not None and not include_usage:
                    chunk["usage"] = usage.to_json()  # the final chunk tells the token counts
                first = False
                yield f"data: {json.dumps(chunk)}\n\n"
            if include_usage:
                chunk = {
                    **_envelope(server, kind, response_id, stream=True),
                    "choices": [],
                    "usage": usage.to_json(),
                }
                yield f"data: {json.dumps(chunk)}\n\n"
        except OpenAIError as exc:
            error = {"error": {"message": exc.message, "type": "server_error", "param": None, "code": None}}
            yield f"data: {json.dumps(error)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def create_app(
    engine: ServingEngine,
    tokenizer: PreTrainedTokenizerBase,
    *,
    model_name: str,
    max_model_len: int,
) -> FastAPI:
    """The FastAPI app serving ``engine`` under ``model_name``; the caller owns the engine."""
    server = _Server(engine, tokenizer, model_name, max_model_len)
    app = FastAPI(title="eaglenest serving", docs_url=None, redoc_url=None)

    @app.exception_handler(OpenAIError)
    async def openai_error(_request: Request, exc: OpenAIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(part) for part in error['loc'] if part != 'body') or 'body'}: {error['msg']}"
            for error in exc.errors()
        ]
        first = exc.errors()[0]["loc"] if exc.errors() else ()
        param = ".".join(str(part) for part in first if part != "body") or None
        return OpenAIError("invalid request: " + "; ".join(problems), param=param).response()

    @app.get("/health", response_model=None)
    async def health() -> dict[str, str] | JSONResponse:
        # A device that failed for good (engine.device_health) fails every request from then on:
        # whatever watches /health must see it, not an "ok" from a server that only errs.
        if engine.device_failure is not None:
            return JSONResponse({"status": "failed", "error": engine.device_failure}, status_code=503)
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {
            "id": model_name,
            "object": "model",
            "created": server.created,
            "owned_by": "eaglenest",
            "max_model_len": max_model_len,
        }
        return {"object": "list", "data": [card]}

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(engine.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest) -> Response:
        prompt_ids = server.completion_prompt(body)
        max_tokens = body.max_tokens if body.max_tokens is not None else DEFAULT_COMPLETION_TOKENS
        request = server.prepare(body, prompt_ids, max_tokens)
        return await _respond(server, "completion", body, request, _Usage(len(prompt_ids)))

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest) -> Response:
        prompt_ids = server.chat_prompt(body)
        max_tokens = body.max_completion_tokens or body.max_tokens
        request = server.prepare(body, prompt_ids, max_tokens)
        return await _respond(server, "chat", body, request, _Usage(len(prompt_ids)))

    return app
