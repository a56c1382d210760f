# Each class is named exactly after its AWS error code, which rarely ends in "Error".
# ruff: noqa: N818
"""AWS-shaped errors: one class per AWS error code, with the body ``{"__type", "message"}``.

The services raise them; the api renders them (api/error_responses.py).

botocore reads the code from ``__type`` and the text from ``message`` (json protocol);
``X-Amzn-ErrorType`` is sent too for clients that look at headers. SageMaker's modeled
errors carry no ``Exception`` suffix (ResourceNotFound); the protocol-level ones do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from core.sagemaker.validation import ConstraintViolation, ShapeTypeError, format_violations, lower_camel


class AwsError(Exception):
    code: ClassVar[str] = "InternalFailure"
    status_code: ClassVar[int] = 500
    sender_fault: ClassVar[bool] = False
    description: ClassVar[str] = "The request failed."

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, Any]:
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


class RequestEntityTooLargeException(AwsError):
    code = "RequestEntityTooLargeException"
    status_code = 413
    sender_fault = True
    description = "The request body is larger than this server accepts (EAGLENEST_MAX_REQUEST_BODY_BYTES)."


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
    RequestEntityTooLargeException,
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
        if error["type"] in _CONVERSION_ERRORS:
            # MaxResults=lots in a query string: the same SerializationException that
            # {"MaxResults": "lots"} gets from POST /, with the member path in lowerCamel.
            member = ".".join(lower_camel(part) for part in location)
            return SerializationException(
                str(ShapeTypeError(member, value, _CONVERSION_ERRORS[error["type"]]))
            )
        violations.append(ConstraintViolation(path, None if isinstance(value, dict) else value, error["msg"]))
    return ValidationException(format_violations(violations))


_ERRORS_BY_CODE = {error.code: error for error in ALL_ERRORS}
# pydantic's errors for a value that is not of the parameter's type, and the AWS type named.
_CONVERSION_ERRORS = {
    "int_parsing": "an Integer",
    "int_from_float": "an Integer",
    "float_parsing": "a Double",
    "bool_parsing": "a Boolean",
}
