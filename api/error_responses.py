"""AWS errors on the wire: the JSON body and headers botocore reads, and FastAPI's handlers.

botocore reads the code from ``__type`` and the text from ``message`` (json protocol);
``X-Amzn-ErrorType`` is sent too for clients that look at headers.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from core.sagemaker.errors import (
    AUTH_ERRORS,
    AwsError,
    InternalFailure,
    RequestEntityTooLargeException,
    SerializationException,
    UnknownOperationException,
    aws_error_from_pydantic,
)

logger = logging.getLogger(__name__)

AWS_JSON_CONTENT_TYPE = "application/x-amz-json-1.1"


class AwsJsonResponse(Response):
    """A response of ``POST /``: its media type documents ``POST /``'s errors in OpenAPI too."""

    media_type = AWS_JSON_CONTENT_TYPE


def error_responses(*errors: type[AwsError]) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` mapping for a route that can fail with ``errors`` (plus what any can)."""
    by_status: dict[int, list[type[AwsError]]] = {}
    candidates: tuple[type[AwsError], ...] = (
        *errors,
        # Any query, path or body member of the wrong type (MaxResults=ten), like POST /.
        SerializationException,
        *AUTH_ERRORS,
        RequestEntityTooLargeException,
        InternalFailure,
    )
    for error in dict.fromkeys(candidates):
        by_status.setdefault(error.status_code, []).append(error)
    responses: dict[int | str, dict[str, Any]] = {}
    for status, group in sorted(by_status.items()):
        schemas = [error.schema() for error in group]
        model: Any = schemas[0]
        for schema in schemas[1:]:
            model = model | schema
        responses[status] = {"model": model, "description": ", ".join(error.code for error in group)}
    return responses


def render_error(
    error: AwsError, *, request_id: str | None = None, content_type: str = "application/json"
) -> Response:
    headers = {"X-Amzn-ErrorType": error.code}
    if request_id:
        headers["x-amzn-RequestId"] = request_id
    return Response(
        content=json.dumps(error.body()),
        status_code=error.status_code,
        headers=headers,
        media_type=content_type,
    )


def _content_type_for(request: Request) -> str:
    return content_type_for_path(request.url.path)


def content_type_for_path(path: str) -> str:
    """``POST /`` speaks AWS JSON 1.1; the REST face and everything else plain JSON."""
    return AWS_JSON_CONTENT_TYPE if path == "/" else "application/json"


def request_validation_to_aws(exc: RequestValidationError) -> AwsError:
    """FastAPI/pydantic request errors in AWS's words, never FastAPI's 422 shape."""
    return aws_error_from_pydantic(exc.errors())


def add_exception_handlers(app: FastAPI) -> None:
    async def aws_error_handler(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AwsError)
        return render_error(exc, request_id=_request_id(request), content_type=_content_type_for(request))

    async def request_validation_handler(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        error = request_validation_to_aws(exc)
        return render_error(error, request_id=_request_id(request), content_type=_content_type_for(request))

    async def http_exception_handler(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        error = UnknownOperationException(
            f"No route for {request.method} {request.url.path} ({exc.status_code}: {exc.detail})"
        )
        response = render_error(
            error, request_id=_request_id(request), content_type=_content_type_for(request)
        )
        response.status_code = exc.status_code
        return response

    async def unhandled_exception_handler(request: Request, exc: Exception) -> Response:
        request_id = _request_id(request)
        logger.exception(
            "unhandled error in %s %s (request %s)", request.method, request.url.path, request_id
        )
        error = InternalFailure(f"An internal error occurred; request id {request_id}.")
        return render_error(error, request_id=request_id, content_type=_content_type_for(request))

    app.add_exception_handler(AwsError, aws_error_handler)
    app.add_exception_handler(RequestValidationError, request_validation_handler)
    app.add_exception_handler(StarletteHTTPException, http_exception_handler)
    app.add_exception_handler(Exception, unhandled_exception_handler)


def _request_id(request: Request) -> str | None:
    value = request.scope.get("state", {}).get("request_id")
    return value if isinstance(value, str) else None
