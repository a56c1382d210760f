"""Request and response shapes of the four Logs operations we serve (lowerCamel on the wire).

Requests are checked against botocore's logs model first (lengths, patterns, ranges; see
``validate_request``), then parsed; members we do not act on (``unmask``,
``accountIdentifiers``, ``logGroupClass``) are accepted and ignored, as for an account with
no linked accounts and standard-class groups only.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from core.logs.errors import InvalidParameterException
from core.logs.service_model import logs_service_model
from core.sagemaker.errors import SerializationException
from core.sagemaker.validation import ShapeTypeError, ShapeValidator, format_violations


class LogsShape(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="ignore"
    )

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class LogsRequest(LogsShape):
    aws_shape: ClassVar[str]

    @classmethod
    def from_wire(cls, document: Any) -> Self:
        """Validate against the service model (AWS's words), then parse."""
        try:
            violations = ShapeValidator(logs_service_model()).validate(cls.aws_shape, document)
        except ShapeTypeError as error:
            raise SerializationException(str(error)) from None
        if violations:
            raise InvalidParameterException(format_violations(violations))
        try:
            return cls.model_validate(document)
        except ValidationError as error:  # only what the service model does not say (none known)
            raise InvalidParameterException(str(error.errors()[0]["msg"])) from None


class GroupAddressed(LogsRequest):
    """Operations that name one group, by ``logGroupName`` or ``logGroupIdentifier`` (name or ARN)."""

    log_group_name: str | None = None
    log_group_identifier: str | None = None


# --- DescribeLogGroups
class DescribeLogGroupsRequest(LogsRequest):
    aws_shape = "DescribeLogGroupsRequest"
    log_group_name_prefix: str | None = None
    log_group_name_pattern: str | None = None
    log_group_identifiers: list[str] | None = None
    next_token: str | None = None
    limit: int = 50


class LogGroupShape(LogsShape):
    log_group_name: str
    creation_time: int
    retention_in_days: int
    metric_filter_count: int = 0
    arn: str
    log_group_arn: str
    stored_bytes: int
    log_group_class: Literal["STANDARD"] = "STANDARD"


class DescribeLogGroupsResponse(LogsShape):
    log_groups: list[LogGroupShape]
    next_token: str | None = None


# --- DescribeLogStreams
class DescribeLogStreamsRequest(GroupAddressed):
    aws_shape = "DescribeLogStreamsRequest"
    log_stream_name_prefix: str | None = None
    order_by: Literal["LogStreamName", "LastEventTime"] = "LogStreamName"
    descending: bool = False
    next_token: str | None = None
    limit: int = 50


class LogStreamShape(LogsShape):
    log_stream_name: str
    creation_time: int
    first_event_timestamp: int | None = None
    last_event_timestamp: int | None = None
    last_ingestion_time: int | None = None
    arn: str
    stored_bytes: int = 0


class DescribeLogStreamsResponse(LogsShape):
    log_streams: list[LogStreamShape]
    next_token: str | None = None


# --- GetLogEvents
class GetLogEventsRequest(GroupAddressed):
    aws_shape = "GetLogEventsRequest"
    log_stream_name: str
    start_time: int | None = None
    end_time: int | None = None
    next_token: str | None = None
    limit: int = 10000
    start_from_head: bool = False


class OutputLogEvent(LogsShape):
    timestamp: int
    message: str
    ingestion_time: int


class GetLogEventsResponse(LogsShape):
    events: list[OutputLogEvent]
    next_forward_token: str
    next_backward_token: str


# --- FilterLogEvents
class FilterLogEventsRequest(GroupAddressed):
    aws_shape = "FilterLogEventsRequest"
    log_stream_names: list[str] | None = None
    log_stream_name_prefix: str | None = None
    start_time: int | None = None
    end_time: int | None = None
    filter_pattern: str | None = None
    next_token: str | None = None
    limit: int = 10000


class FilteredLogEvent(LogsShape):
    log_stream_name: str
    timestamp: int
    message: str
    ingestion_time: int
    event_id: str


class FilterLogEventsResponse(LogsShape):
    events: list[FilteredLogEvent]
    next_token: str | None = None
