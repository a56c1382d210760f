"""``POST /endpoints/{EndpointName}/invocations`` (and ``-response-stream``): the sagemaker-runtime
REST wire, signed with SigV4 for service ``sagemaker`` as botocore's runtime client signs it.

The body goes to one of the endpoint's instances (round robin) as an OpenAI request; see
api/runtime/payloads.py for the shapes. Errors are the runtime's: ValidationError (no such
endpoint, not in service, a body no model takes), ModelError (the model answered an error),
ServiceUnavailable (no instance answers now).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from api.deps import get_api_state, signed_request_from
from api.error_responses import error_responses
from api.runtime import event_stream, proxy
from api.runtime.invocation_log import Invocation
from api.runtime.payloads import (
    ModelCall,
    completion_text,
    parse_invocation,
    response_document,
    stream_piece,
    streamed_document,
)
from api.runtime.targets import Target
from api.state import ApiState
from core.principal import Principal
from core.sagemaker.runtime_errors import RUNTIME_ERRORS

router = APIRouter(tags=["runtime"])
VARIANT_HEADER = "X-Amzn-Invoked-Production-Variant"


async def _prepare(
    request: Request, operation: str, *, stream: bool
) -> tuple[ApiState, Principal, Target, ModelCall, bytes]:
    request.scope.setdefault("state", {})["operation"] = operation
    body = await request.body()
    state = get_api_state(request)
    principal = await run_in_threadpool(state.authenticator.authenticate, signed_request_from(request, body))
    name = request.path_params["endpoint_name"]
    target = await run_in_threadpool(state.runtime.balancer.target, principal, name)
    call = parse_invocation(body, stream=stream)
    return state, principal, target, call, body


@router.post(
    "/endpoints/{endpoint_name}/invocations",
    summary="InvokeEndpoint (sagemaker-runtime)",
    responses={
        200: {"description": "The model's answer (application/json)."},
        **error_responses(*RUNTIME_ERRORS),
    },
)
async def invoke_endpoint(endpoint_name: str, request: Request) -> Response:
    started = time.perf_counter()
    state, _principal, target, call, body = await _prepare(request, "InvokeEndpoint", stream=False)
    invocation = Invocation(
        target=target,
        call=call,
        request_body=body,
        started=started,
        content_type=request.headers.get("content-type", "application/json"),
    )
    try:
        answer = await proxy.complete(state.runtime.client, target, call)
    except Exception as error:
        state.runtime.finished(invocation, error=error)
        raise
    document = response_document(call, answer)
    output = json.dumps(document).encode()
    state.runtime.finished(invocation, text=completion_text(call, answer), usage=answer.get("usage"))
    await state.runtime.capture(invocation, response_body=output)
    return Response(output, media_type="application/json", headers={VARIANT_HEADER: target.variant_name})


@router.post(
    "/endpoints/{endpoint_name}/invocations-response-stream",
    summary="InvokeEndpointWithResponseStream (sagemaker-runtime)",
    responses={
        200: {"description": f"PayloadPart events ({event_stream.CONTENT_TYPE})."},
        **error_responses(*RUNTIME_ERRORS),
    },
)
async def invoke_endpoint_with_response_stream(endpoint_name: str, request: Request) -> Response:
    started = time.perf_counter()
    state, _principal, target, call, body = await _prepare(
        request, "InvokeEndpointWithResponseStream", stream=True
    )
    invocation = Invocation(
        target=target,
        call=call,
        request_body=body,
        started=started,
        content_type=request.headers.get("content-type", "application/json"),
    )
    stack = AsyncExitStack()
    try:
        upstream = await stack.enter_async_context(proxy.open_stream(state.runtime.client, target, call))
    except Exception as error:
        await stack.aclose()
        state.runtime.finished(invocation, error=error)
        raise

    async def events() -> AsyncIterator[bytes]:
        pieces: list[str] = []
        usage = None
        try:
            async for event in proxy.sse_events(upstream):
                piece = stream_piece(call, event)
                pieces.append(piece)
                usage = event.get("usage") or usage
                if call.kind == "inputs":
                    line = {"token": {"text": piece}}
                    yield event_stream.payload_part(json.dumps(line).encode() + b"\n")
                else:
                    yield event_stream.payload_part(b"data: " + json.dumps(event).encode() + b"\n\n")
            text = "".join(pieces)
            state.runtime.finished(invocation, text=text, usage=usage)
            # Captured before the last event: a client that saw the stream end has it on disk.
            document = json.dumps(streamed_document(call, text)).encode()
            await state.runtime.capture(invocation, response_body=document)
            if call.kind == "inputs":
                full = (call.prompt or "") + text if call.return_full_text else text
                final = {"token": {"text": ""}, "generated_text": full}
                yield event_stream.payload_part(json.dumps(final).encode() + b"\n")
            else:
                yield event_stream.payload_part(b"data: [DONE]\n\n")
        except Exception as error:  # the status line is sent: the error travels as an event
            state.runtime.finished(invocation, error=error)
            yield event_stream.model_stream_error(str(error), "ModelStreamError")
        finally:
            await stack.aclose()

    return StreamingResponse(
        events(), media_type=event_stream.CONTENT_TYPE, headers={VARIANT_HEADER: target.variant_name}
    )
