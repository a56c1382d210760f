"""SageMaker endpoint data capture lines.

Each line of a capture file wraps one invocation::

    {"captureData": {"endpointInput":  {"observedContentType": "application/json",
                                         "mode": "INPUT",  "data": "...", "encoding": "JSON"},
                     "endpointOutput": {"observedContentType": "application/json",
                                         "mode": "OUTPUT", "data": "...", "encoding": "BASE64"}},
     "eventMetadata": {"eventId": "...", "inferenceTime": "..."}, "eventVersion": "0"}

``data`` holds the request or response body as text (JSON/CSV encoding) or as
base64 (BASE64 encoding). Bodies we read: chat requests (``messages``), completions
requests (``prompt``) and Hugging Face TGI/LMI requests (``inputs``); responses with
``choices[].message.content``, ``choices[].text``, ``generated_text`` (or a list of
``{"generated_text"}``), and server-sent-event streams of those. An invocation
captured without its output (capture mode Input) becomes a prompt with no answer,
which self-distillation then fills in.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from trainer.data.errors import RecordSkipped
from trainer.data.formats.common import finish_turns, json_type, require_mapping, text_of_content
from trainer.data.formats.openai_chat import parse_messages
from trainer.data.schema import Message

NAME = "sagemaker-capture"


def matches(record: Mapping[str, Any]) -> bool:
    return "captureData" in record


def parse(record: Mapping[str, Any]) -> list[Message]:
    capture = require_mapping(record["captureData"], "'captureData'")
    if "endpointInput" not in capture:
        raise RecordSkipped("'captureData' has no 'endpointInput'")
    request = _json_body(capture["endpointInput"], "endpointInput")
    prompt = _request_messages(request)
    if capture.get("endpointOutput") is None:
        return finish_turns(prompt)
    response_text = decode_body(capture["endpointOutput"], "endpointOutput")
    answer = _response_text(response_text, _prompt_text(request))
    return finish_turns([*prompt, Message(role="assistant", content=answer)])


def decode_body(raw: Any, what: str) -> str:
    """The body text of endpointInput/endpointOutput, whatever its encoding."""
    section = require_mapping(raw, f"'{what}'")
    data = section.get("data")
    if not isinstance(data, str):
        raise RecordSkipped(f"'{what}.data' must be a string, got {json_type(data)}")
    encoding = str(section.get("encoding", "JSON")).upper()
    if encoding == "BASE64":
        try:
            return base64.b64decode(data, validate=True).decode("utf-8")
        except (binascii.Error, ValueError) as exc:
            raise RecordSkipped(f"'{what}.data' is not valid base64 UTF-8 text ({exc})") from exc
    if encoding in ("JSON", "CSV"):
        return data
    raise RecordSkipped(f"'{what}.encoding' is {encoding!r}; expected JSON, CSV or BASE64")


def _json_body(raw: Any, what: str) -> Mapping[str, Any]:
    text = decode_body(raw, what)
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordSkipped(f"'{what}' body is not JSON ({exc.msg})") from exc
    return require_mapping(body, f"'{what}' body")


def _request_messages(request: Mapping[str, Any]) -> list[Message]:
    if "messages" in request:
        return parse_messages(request["messages"], "request 'messages'")
    text = _prompt_text(request)
    if text is None:
        keys = ", ".join(sorted(request)) or "none"
        raise RecordSkipped(f"request body has no 'messages', 'prompt' or 'inputs' (keys: {keys})")
    return [Message(role="user", content=text)]


def _prompt_text(request: Mapping[str, Any]) -> str | None:
    for key in ("prompt", "inputs"):
        value = request.get(key)
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if isinstance(value, str):
            return value
        if value is not None:
            raise RecordSkipped(f"request '{key}' must be a string, got {json_type(value)}")
    return None


def _response_text(text: str, prompt: str | None) -> str:
    stripped = text.lstrip()
    if stripped.startswith(("data:", "event:")):
        return _stream_text(stripped)
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordSkipped(f"'endpointOutput' body is not JSON ({exc.msg})") from exc
    answer = _answer_of(body)
    if answer is None:
        raise RecordSkipped(f"response body holds no answer text ({_describe(body)})")
    # TGI returns the prompt in front of the answer when return_full_text is on.
    if prompt and answer.startswith(prompt):
        answer = answer[len(prompt) :]
    return answer


def _answer_of(body: Any) -> str | None:
    if isinstance(body, list):
        body = body[0] if len(body) == 1 else None
    if not isinstance(body, Mapping):
        return None
    if isinstance(body.get("generated_text"), str):
        return str(body["generated_text"])
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        choice = choices[0]
        if isinstance(choice.get("message"), Mapping):
            content = choice["message"].get("content")
            return None if content is None else text_of_content(content, "response message")
        if isinstance(choice.get("text"), str):
            return str(choice["text"])
    return None


def _stream_text(stream: str) -> str:
    """Concatenate the pieces of an OpenAI or TGI server-sent-event stream."""
    pieces: list[str] = []
    for raw_line in stream.split("\n"):
        line = raw_line.strip()
        if not line.startswith("data:"):
            continue
        payload = line[len("data:") :].strip()
        if not payload or payload == "[DONE]":
            continue
        try:
            event = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise RecordSkipped(f"response stream has an event that is not JSON ({exc.msg})") from exc
        pieces.append(_stream_piece(event))
    if not pieces:
        raise RecordSkipped("response stream holds no data events")
    return "".join(pieces)


def _stream_piece(event: Any) -> str:
    if not isinstance(event, Mapping):
        return ""
    choices = event.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, Mapping) and isinstance(delta.get("content"), str):
            return str(delta["content"])
        if isinstance(choice.get("text"), str):
            return str(choice["text"])
        return ""
    token = event.get("token")
    if isinstance(token, Mapping) and isinstance(token.get("text"), str) and not token.get("special"):
        return str(token["text"])
    return ""


def _describe(body: Any) -> str:
    if isinstance(body, Mapping):
        return "keys: " + (", ".join(sorted(body)) or "none")
    return json_type(body)
