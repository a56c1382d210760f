"""``POST /``: the AWS JSON 1.1 entry point. ``X-Amz-Target: SageMaker.<Operation>`` picks the handler."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

import api.operations  # noqa: F401 - importing registers every handler in REGISTRY
from api.auth.sigv4 import SignedRequest
from api.deps import get_api_state, signed_request_from
from api.error_responses import AWS_JSON_CONTENT_TYPE, AwsJsonResponse, error_responses
from api.json_body import parse_json_body
from api.operations.logs import LOGS_OPERATIONS, handle_logs_request, is_logs_target, logs_operation_name
from api.operations.registry import REGISTRY, Operation, OperationContext
from api.state import ApiState
from api.sts import handle_sts_request, is_query_request
from core.principal import Principal
from core.sagemaker.errors import (
    ALL_ERRORS,
    UnknownOperationException,
    aws_error_from_pydantic,
)
from core.sagemaker.service_model import sagemaker_service_model
from db.session import UnitOfWork, unit_of_work

TARGET_HEADER = "x-amz-target"

router = APIRouter(tags=["aws"])


def resolve_operation(target: str | None) -> Operation:
    prefix = sagemaker_service_model().metadata["targetPrefix"]
    if not target:
        raise UnknownOperationException(
            f"The request has no X-Amz-Target header; expected '{prefix}.<Operation>'."
        )
    service, _, name = target.partition(".")
    operation = REGISTRY.get(name) if service == prefix else None
    if operation is None:
        raise UnknownOperationException(
            f"Unknown operation '{target}'. This service implements: "
            + ", ".join(f"{prefix}.{known}" for known in REGISTRY.names)
        )
    return operation


def handle_aws_request(state: ApiState, signed: SignedRequest, target: str | None) -> bytes:
    """Authenticate, dispatch and serialise one request; AWS errors propagate to the handlers."""
    principal = state.authenticator.authenticate(signed)
    operation = resolve_operation(target)
    try:
        request = operation.request_model.model_validate(parse_json_body(signed.body))
    except ValidationError as error:
        raise aws_error_from_pydantic(error.errors()) from None
    if operation.read_only:
        # An autocommit session: each SELECT stands alone and there is nothing to commit.
        with state.read_session_factory() as session:
            result = operation.handler(_context(state, principal, UnitOfWork(session)), request)
    else:
        # The request's transaction: committed (then its after-commit work runs) before the
        # response is written, rolled back if the handler raises.
        with unit_of_work(state.session_factory) as unit:
            result = operation.handler(_context(state, principal, unit), request)
    return json.dumps({} if result is None else result.to_wire(), separators=(",", ":")).encode()


def _context(state: ApiState, principal: Principal, unit: UnitOfWork) -> OperationContext:
    return OperationContext(
        unit=unit, principal=principal, dispatcher=state.dispatcher, settings=state.settings
    )


def _named_operation(target: str | None) -> Operation | None:
    _, _, name = (target or "").partition(".")
    return REGISTRY.get(name)


def runs_inline(operation: Operation | None, state: ApiState) -> bool:
    """Whether to handle the request on the event loop instead of in the thread pool.

    Describe/List are one indexed SELECT in autocommit mode (about a millisecond); the hop
    to a worker thread and back costs about as much CPU again. On Postgres such a read
    never waits on a lock, so it cannot stall the loop; on SQLite a reader can wait for a
    writer's lock, so there every request goes to the thread pool.
    """
    return operation is not None and operation.read_only and not state.settings.is_sqlite


@router.post(
    "/",
    summary="AWS JSON 1.1 entry point (SageMaker control plane, CloudWatch Logs; STS on the query protocol)",
    response_class=AwsJsonResponse,
    description=(
        "Send `X-Amz-Target: SageMaker.<Operation>` and `Content-Type: application/x-amz-json-1.1`, "
        "signed with SigV4. Implemented operations: " + ", ".join(REGISTRY.names) + ". "
        "CloudWatch Logs (`X-Amz-Target: Logs_20140328.<Operation>`, signed for `logs`): "
        + ", ".join(sorted(LOGS_OPERATIONS))
        + ". STS (query protocol: a form body `Action=GetCallerIdentity&Version=2011-06-15`, "
        "no X-Amz-Target, signed for `sts`, XML answers): GetCallerIdentity."
    ),
    responses={
        200: {
            "description": "The operation's output shape (botocore's SageMaker model).",
            "content": {AWS_JSON_CONTENT_TYPE: {"schema": {"type": "object"}}},
        },
        **error_responses(*ALL_ERRORS),
    },
    openapi_extra={
        "parameters": [
            {
                "name": "X-Amz-Target",
                "in": "header",
                "required": True,
                "schema": {"type": "string", "example": "SageMaker.DescribeOptimizationJob"},
            }
        ],
        "requestBody": {
            "required": False,
            "content": {AWS_JSON_CONTENT_TYPE: {"schema": {"type": "object"}}},
        },
    },
)
async def aws_json_endpoint(request: Request) -> Response:
    target = request.headers.get(TARGET_HEADER)
    if is_query_request(request.headers.get("content-type"), target):
        # STS speaks the query protocol on the same URL (--endpoint-url is one address).
        request.scope.setdefault("state", {})["operation"] = "sts"
        signed = signed_request_from(request, await request.body())
        request_id = str(request.scope["state"].get("request_id", ""))
        return await run_in_threadpool(handle_sts_request, get_api_state(request), signed, request_id)
    if target is not None and is_logs_target(target):
        # CloudWatch Logs shares the wire format and the URL; only the target prefix differs.
        request.scope.setdefault("state", {})["operation"] = f"logs.{logs_operation_name(target)}"
        signed = signed_request_from(request, await request.body())
        body = await run_in_threadpool(handle_logs_request, get_api_state(request), signed, target)
        return AwsJsonResponse(content=body)
    operation = _named_operation(target)
    request.scope.setdefault("state", {})["operation"] = operation.name if operation else "unknown"
    signed = signed_request_from(request, await request.body())
    state = get_api_state(request)
    if runs_inline(operation, state):
        body = handle_aws_request(state, signed, target)
    else:
        body = await run_in_threadpool(handle_aws_request, state, signed, target)
    return AwsJsonResponse(content=body)
