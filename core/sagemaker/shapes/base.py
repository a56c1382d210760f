"""Base classes for AWS shapes: PascalCase on the wire, absent members omitted, epoch timestamps."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    GetJsonSchemaHandler,
    PlainSerializer,
    model_validator,
)
from pydantic.alias_generators import to_pascal
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from core.sagemaker.json_schema import add_service_model_constraints
from core.sagemaker.service_model import sagemaker_service_model
from core.sagemaker.validation import ShapeTypeError, ShapeValidator, format_violations, parse_timestamp


def _to_datetime(value: Any) -> Any:
    if isinstance(value, datetime):
        return value
    parsed = parse_timestamp(value)
    return value if parsed is None else parsed


# Timestamps travel as epoch seconds (JSON numbers); botocore also accepts ISO-8601 on input.
AwsTimestamp = Annotated[
    datetime,
    BeforeValidator(_to_datetime),
    PlainSerializer(lambda value: value.timestamp(), return_type=float, when_used="json"),
]


class AwsShape(BaseModel):
    """A structure shape: snake_case in Python, the botocore member name (PascalCase) on the wire."""

    model_config = ConfigDict(
        alias_generator=to_pascal,
        validate_by_name=True,
        validate_by_alias=True,
        extra="ignore",
        # Schema titles read as the wire names (OptimizationJobName, not Optimizationjobname).
        field_title_generator=lambda name, _field: to_pascal(name),
    )
    # The botocore shape this class stands for, when its name differs (for the JSON schema).
    botocore_shape: ClassVar[str | None] = None

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """Publish the service model's constraints (lengths, patterns, enums, ranges) in OpenAPI."""
        schema = handler.resolve_ref_schema(handler(core_schema))
        add_service_model_constraints(schema, cls.botocore_shape or cls.__name__)
        return schema

    def to_wire(self) -> dict[str, Any]:
        """The JSON body: aliases, epoch timestamps, and absent members left out (never null)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class AwsRequest(AwsShape):
    """A top-level operation input, checked against the service model before pydantic parses it.

    Build one with ``model_validate({...PascalCase...})``: constraint violations raise a
    pydantic error of type ``aws_error`` carrying the AWS code and message, which both the
    AWS route and the REST routes turn into the AWS error response.
    """

    aws_shape: ClassVar[str]
    _validator: ClassVar[ShapeValidator | None] = None

    @model_validator(mode="before")
    @classmethod
    def _check_against_service_model(cls, data: Any) -> Any:
        if cls._validator is None:
            AwsRequest._validator = ShapeValidator(sagemaker_service_model())
        validator = AwsRequest._validator
        assert validator is not None
        try:
            violations = validator.validate(cls.aws_shape, data)
        except ShapeTypeError as error:
            raise aws_error("SerializationException", str(error)) from None
        if violations:
            raise aws_error("ValidationException", format_violations(violations))
        return data

    @classmethod
    def from_wire(cls, data: Any) -> Self:
        return cls.model_validate(data)


def aws_error(code: str, message: str) -> PydanticCustomError:
    return PydanticCustomError("aws_error", "{aws_message}", {"aws_code": code, "aws_message": message})
