"""What an InvokeEndpoint body asks the serving engine, and how its answer goes back.

Three body shapes, as SageMaker's LLM containers accept them:

- ``{"inputs": "...", "parameters": {...}}`` (Hugging Face TGI / LMI): sent to
  ``/v1/completions``; the answer is ``[{"generated_text": "..."}]`` (TGI's shape, which the
  SageMaker SDK's Hugging Face predictors read), and a stream is JSON lines
  ``{"token": {"text": "..."}}`` ending with one that has ``generated_text``;
- an OpenAI chat body (``messages``): ``/v1/chat/completions``, answered unchanged;
- an OpenAI completions body (``prompt``): ``/v1/completions``, answered unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from core.sagemaker.runtime_errors import ValidationError

Kind = Literal["inputs", "chat", "completion"]

# TGI parameter -> OpenAI field; do_sample and return_full_text are handled on their own.
_PARAMETERS = {
    "max_new_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "stop": "stop",
    "seed": "seed",
}
DEFAULT_MAX_NEW_TOKENS = 64


@dataclass(frozen=True)
class ModelCall:
    kind: Kind
    path: str
    body: dict[str, Any]
    # The prompt text of an ``inputs`` body (for return_full_text and data capture).
    prompt: str | None = None
    return_full_text: bool = False


def parse_invocation(raw: bytes, *, stream: bool) -> ModelCall:
    """The serving request for an InvokeEndpoint body; ValidationError for bodies no model takes."""
    try:
        document = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValidationError(f"The request body is not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise ValidationError("The request body must be a JSON object with inputs, messages or prompt.")
    if "messages" in document:
        return ModelCall("chat", "/v1/chat/completions", _openai_body(document, stream))
    if "prompt" in document:
        return ModelCall("completion", "/v1/completions", _openai_body(document, stream))
    if "inputs" in document:
        return _inputs_call(document, stream)
    raise ValidationError(
        "The request body has none of inputs (with parameters), messages (OpenAI chat) or prompt "
        "(OpenAI completions)."
    )


def _openai_body(document: dict[str, Any], stream: bool) -> dict[str, Any]:
    # The endpoint serves one model under the endpoint's name; a model field names nothing here.
    body = {key: value for key, value in document.items() if key != "model"}
    body["stream"] = stream
    return body


def _inputs_call(document: dict[str, Any], stream: bool) -> ModelCall:
    inputs = document["inputs"]
    if isinstance(inputs, list) and len(inputs) == 1 and isinstance(inputs[0], str):
        inputs = inputs[0]
    if not isinstance(inputs, str) or not inputs:
        raise ValidationError("inputs must be a non-empty string (one prompt per request).")
    parameters = document.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise ValidationError("parameters must be a JSON object.")
    body: dict[str, Any] = {"prompt": inputs, "stream": stream, "max_tokens": DEFAULT_MAX_NEW_TOKENS}
    for name, field in _PARAMETERS.items():
        if parameters.get(name) is not None:
            body[field] = parameters[name]
    if parameters.get("do_sample") is False:
        body["temperature"] = 0.0
    return ModelCall(
        "inputs",
        "/v1/completions",
        body,
        prompt=inputs,
        return_full_text=bool(parameters.get("return_full_text", False)),
    )


def completion_text(call: ModelCall, answer: dict[str, Any]) -> str:
    """The generated text of a non-streamed OpenAI answer."""
    choice = (answer.get("choices") or [{}])[0]
    if call.kind == "chat":
        return str((choice.get("message") or {}).get("content") or "")
    return str(choice.get("text") or "")


def response_document(call: ModelCall, answer: dict[str, Any]) -> Any:
    """InvokeEndpoint's Body for the serving engine's (non-streamed) answer."""
    if call.kind != "inputs":
        return answer
    text = completion_text(call, answer)
    if call.return_full_text and call.prompt is not None:
        text = call.prompt + text
    return [{"generated_text": text}]


def stream_piece(call: ModelCall, event: dict[str, Any]) -> str:
    """The text one streamed OpenAI chunk adds."""
    choice = (event.get("choices") or [{}])[0]
    if call.kind == "chat":
        return str((choice.get("delta") or {}).get("content") or "")
    return str(choice.get("text") or "")


def streamed_document(call: ModelCall, text: str) -> Any:
    """A streamed answer as the non-streamed one would have been (what data capture stores)."""
    if call.kind == "inputs":
        return [{"generated_text": (call.prompt or "") + text if call.return_full_text else text}]
    if call.kind == "chat":
        return {"object": "chat.completion", "choices": [{"message": {"role": "assistant", "content": text}}]}
    return {"object": "text_completion", "choices": [{"text": text}]}
