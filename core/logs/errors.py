# Each class is named exactly after its AWS error code.
# ruff: noqa: N818
"""CloudWatch Logs' error codes (its modeled errors carry the ``Exception`` suffix)."""

from __future__ import annotations

from core.sagemaker.errors import AwsError


class ResourceNotFoundException(AwsError):
    code = "ResourceNotFoundException"
    status_code = 400
    sender_fault = True
    description = "The log group or log stream does not exist in this account and region."


class InvalidParameterException(AwsError):
    code = "InvalidParameterException"
    status_code = 400
    sender_fault = True
    description = "A parameter is out of range, malformed (a nextToken, a filter pattern) or in conflict."


LOGS_ERRORS: tuple[type[AwsError], ...] = (
    ResourceNotFoundException,
    InvalidParameterException,
)
