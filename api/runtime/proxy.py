"""Send an invocation to the endpoint's instances over HTTP and turn their failures into AWS errors.

An instance that refuses the connection (crashed, being restarted) is skipped for the next
one; only when none answers is the request ServiceUnavailable. An instance that answers with
an error status is the model's error (ModelError, with its status and message).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from api.runtime.payloads import ModelCall
from api.runtime.targets import Target
from core.sagemaker.runtime_errors import ModelError, ServiceUnavailable

# A long generation on a CPU may take minutes; connecting must not.
TIMEOUT = httpx.Timeout(600.0, connect=5.0)


def model_error(target: Target, status: int, text: str) -> ModelError:
    side = "client" if status < 500 else "server"
    return ModelError(
        f'Received {side} error ({status}) from {target.variant_name} with message "{text}".',
        original_status_code=status,
        original_message=text,
    )


def _unavailable(target: Target, error: Exception) -> ServiceUnavailable:
    return ServiceUnavailable(
        f"No instance of endpoint {target.endpoint_name} answered ({error}); retry shortly."
    )


async def complete(client: httpx.AsyncClient, target: Target, call: ModelCall) -> dict[str, Any]:
    last_error: Exception | None = None
    for url in target.urls:
        try:
            response = await client.post(url + call.path, json=call.body, timeout=TIMEOUT)
        except httpx.TransportError as error:
            last_error = error
            continue
        if response.status_code >= 400:
            raise model_error(target, response.status_code, response.text)
        answer: dict[str, Any] = response.json()
        return answer
    raise _unavailable(target, last_error or RuntimeError("no instance"))


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient, target: Target, call: ModelCall
) -> AsyncIterator[httpx.Response]:
    """The instance's streamed answer, its status already checked."""
    last_error: Exception | None = None
    for url in target.urls:
        request = client.build_request("POST", url + call.path, json=call.body, timeout=TIMEOUT)
        try:
            response = await client.send(request, stream=True)
        except httpx.TransportError as error:
            last_error = error
            continue
        try:
            if response.status_code >= 400:
                text = (await response.aread()).decode("utf-8", "replace")
                raise model_error(target, response.status_code, text)
            yield response
        finally:
            await response.aclose()
        return
    raise _unavailable(target, last_error or RuntimeError("no instance"))


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON events of a server-sent-events answer, until ``[DONE]``."""
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            return
        event: dict[str, Any] = json.loads(data)
        yield event
