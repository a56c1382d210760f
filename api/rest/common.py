"""Helpers the REST routers share."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import ValidationError

from api.errors import aws_error_from_pydantic
from api.shapes.base import AwsRequest, AwsShape

RequestT = TypeVar("RequestT", bound=AwsRequest)


class EmptyResponse(AwsShape):
    """``{}``, what AWS returns for Stop/Delete."""


def build_request(model: type[RequestT], members: dict[str, Any]) -> RequestT:
    """Validate path/query values exactly as the AWS route validates a JSON body."""
    present = {name: value for name, value in members.items() if value is not None}
    try:
        return model.model_validate(present)
    except ValidationError as error:
        raise aws_error_from_pydantic(error.errors()) from None
