"""CloudWatch Logs on the AWS JSON 1.1 wire: ``X-Amz-Target: Logs_20140328.<Operation>``.

The same ``POST /`` as SageMaker (one --endpoint-url serves every service), signed for the
service ``logs``. Handlers are thin: parse against botocore's logs model, call the service.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from api.auth.sigv4 import SignedRequest
from api.json_body import parse_json_body
from api.state import ApiState
from core.logs.service_model import LOGS_SIGNING_NAME, LOGS_TARGET_PREFIX
from core.logs.shapes import (
    DescribeLogGroupsRequest,
    DescribeLogStreamsRequest,
    FilterLogEventsRequest,
    GetLogEventsRequest,
    LogsRequest,
    LogsShape,
)
from core.principal import Principal
from core.sagemaker.errors import UnknownOperationException
from core.services import logs as service


@dataclass(frozen=True)
class LogsOperation:
    request_model: type[LogsRequest]
    handler: Callable[[Session, Principal, Any], LogsShape]


LOGS_OPERATIONS: dict[str, LogsOperation] = {
    "DescribeLogGroups": LogsOperation(DescribeLogGroupsRequest, service.describe_log_groups),
    "DescribeLogStreams": LogsOperation(DescribeLogStreamsRequest, service.describe_log_streams),
    "GetLogEvents": LogsOperation(GetLogEventsRequest, service.get_log_events),
    "FilterLogEvents": LogsOperation(FilterLogEventsRequest, service.filter_log_events),
}


def is_logs_target(target: str | None) -> bool:
    return target is not None and target.partition(".")[0] == LOGS_TARGET_PREFIX


def logs_operation_name(target: str) -> str:
    name = target.partition(".")[2]
    return name if name in LOGS_OPERATIONS else "unknown"


def handle_logs_request(state: ApiState, signed: SignedRequest, target: str) -> bytes:
    """Authenticate for ``logs``, dispatch, serialise; AWS errors propagate to the handlers."""
    principal = state.authenticator.authenticate(signed, service=LOGS_SIGNING_NAME)
    name = target.partition(".")[2]
    operation = LOGS_OPERATIONS.get(name)
    if operation is None:
        raise UnknownOperationException(
            f"Unknown operation '{target}'. This service implements: "
            + ", ".join(f"{LOGS_TARGET_PREFIX}.{known}" for known in sorted(LOGS_OPERATIONS))
        )
    request = operation.request_model.from_wire(parse_json_body(signed.body))
    # Reads only: an autocommit session, as SageMaker's Describe/List get.
    with state.read_session_factory() as session:
        result = operation.handler(session, principal, request)
    return json.dumps(result.to_wire(), separators=(",", ":")).encode()
