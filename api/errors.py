# Each class is named exactly after its AWS error code, which rarely ends in "Error".
# ruff: noqa: N818
"""AWS-shaped errors: one class per AWS error code, rendered as ``{"__type", "message"}``.

botocore reads the code from ``__type`` and the text from ``message`` (json protocol);
``X-Amzn-ErrorType`` is sent too for clients that look at headers. SageMaker's modeled
errors carry no ``Exception`` suffix (ResourceNotFound); the protocol-level ones do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, create_model
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.wire.validation import ConstraintViolation, format_violations

logger = logging.getLogger(__name__)

AWS_JSON_CONTENT_TYPE = "application/x-amz-json-1.1"


class AwsError(Exception):
    code: ClassVar[str] = "InternalFailure"
    status_code: ClassVar[int] = 500
    sender_fault: ClassVar[bool] = False
    description: ClassVar[str] = "The request failed."

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, str]:
        return {"__type": self.code, "message": self.message}

    @classmethod
    def schema(cls) -> type[BaseModel]:
        """A pydantic model of this error's body, for the OpenAPI ``responses=``."""
        return _error_schemas.setdefault(cls.code, _build_schema(cls))


class ValidationException(AwsError):
    code = "ValidationException"
    status_code = 400
    sender_fault = True
    description = "The request failed validation (member constraints, cross-references or state)."

    @classmethod
    def from_violations(cls, violations: list[ConstraintViolation]) -> ValidationException:
        return cls(format_violations(violations))

    @classmethod
    def for_member(cls, path: str, value: Any, constraint: str) -> ValidationException:
        return cls.from_violations([ConstraintViolation(path, value, constraint)])


class SerializationException(AwsError):
    code = "SerializationException"
    status_code = 400
    sender_fault = True
    description = "The body is not valid JSON, or a member has the wrong JSON type."


class UnknownOperationException(AwsError):
    code = "UnknownOperationException"
    status_code = 400
    sender_fault = True
    description = "X-Amz-Target names no operation this service implements."


class ResourceInUse(AwsError):
    code = "ResourceInUse"
    status_code = 400
    sender_fault = True
    description = "A resource with this name already exists."


class ResourceNotFound(AwsError):
    code = "ResourceNotFound"
    status_code = 400
    sender_fault = True
    description = "The named resource does not exist in this account."


class ResourceLimitExceeded(AwsError):
    code = "ResourceLimitExceeded"
    status_code = 400
    sender_fault = True
    description = "The account has reached a limit (e.g. active optimization jobs)."


class MissingAuthenticationTokenException(AwsError):
    code = "MissingAuthenticationTokenException"
    status_code = 400
    sender_fault = True
    description = "The request carries no SigV4 Authorization header."


class IncompleteSignatureException(AwsError):
    code = "IncompleteSignatureException"
    status_code = 400
    sender_fault = True
    description = "The Authorization header is malformed or misses a required part."


class UnrecognizedClientException(AwsError):
    code = "UnrecognizedClientException"
    status_code = 400
    sender_fault = True
    description = "The access key (or security token) is not known to this server."


class InvalidSignatureException(AwsError):
    code = "InvalidSignatureException"
    status_code = 400
    sender_fault = True
    description = "The signature does not match, or X-Amz-Date is outside the allowed clock skew."


class InternalFailure(AwsError):
    code = "InternalFailure"
    status_code = 500
    sender_fault = False
    description = "An unexpected server error; safe to retry."


ALL_ERRORS: tuple[type[AwsError], ...] = (
    ValidationException,
    SerializationException,
    UnknownOperationException,
    ResourceInUse,
    ResourceNotFound,
    ResourceLimitExceeded,
    MissingAuthenticationTokenException,
    IncompleteSignatureException,
    UnrecognizedClientException,
    InvalidSignatureException,
    InternalFailure,
)
AUTH_ERRORS: tuple[type[AwsError], ...] = (
    MissingAuthenticationTokenException,
    IncompleteSignatureException,
    UnrecognizedClientException,
    InvalidSignatureException,
)

_error_schemas: dict[str, type[BaseModel]] = {}


def _build_schema(error: type[AwsError]) -> type[BaseModel]:
    code_type: Any = Literal[error.code]  # a one-value enum in the JSON schema
    return create_model(
        f"{error.code}Error",
        __config__=ConfigDict(populate_by_name=True, json_schema_extra={"description": error.description}),
        type_=(code_type, Field(alias="__type")),
        message=(str, Field(description="What was wrong, naming the member, value or resource.")),
    )


def error_responses(*errors: type[AwsError]) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` mapping for a route that can fail with ``errors`` (plus auth errors)."""
    by_status: dict[int, list[type[AwsError]]] = {}
    candidates: tuple[type[AwsError], ...] = (*errors, *AUTH_ERRORS, InternalFailure)
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
    return AWS_JSON_CONTENT_TYPE if request.url.path == "/" else "application/json"


def aws_error_from_pydantic(errors: Sequence[Any]) -> AwsError:
    """Pydantic errors in AWS's words: our request models raise ``aws_error`` carrying the AWS
    code and message; anything else (FastAPI query/path checks) becomes a ValidationException."""
    violations: list[ConstraintViolation] = []
    for error in errors:
        if error["type"] == "aws_error":
            context = error["ctx"]
            return _ERRORS_BY_CODE[context["aws_code"]](context["aws_message"])
        if error["type"] == "json_invalid":
            return SerializationException(f"The request body is not valid JSON: {error.get('msg', '')}")
        location = [str(part) for part in error["loc"] if part not in ("body", "query", "path")]
        path = ".".join(location) or "body"
        value = error.get("input")
        violations.append(ConstraintViolation(path, None if isinstance(value, dict) else value, error["msg"]))
    return ValidationException(format_violations(violations))


def request_validation_to_aws(exc: RequestValidationError) -> AwsError:
    """FastAPI/pydantic request errors in AWS's words, never FastAPI's 422 shape."""
    return aws_error_from_pydantic(exc.errors())


_ERRORS_BY_CODE = {error.code: error for error in ALL_ERRORS}


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
