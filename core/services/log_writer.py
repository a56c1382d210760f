"""Where SageMaker writes its logs, and the one way the worker stores log lines there."""

from __future__ import annotations

import time
from collections.abc import Sequence

from sqlalchemy.orm import Session

from db.queries.log_event import NewLogEvent, append_log_events
from db.queries.log_group import ensure_log_group
from db.queries.log_stream import ensure_log_stream

OPTIMIZATION_JOBS_GROUP = "/aws/sagemaker/OptimizationJobs"
# CloudWatch rejects larger events; a longer line (a traceback in one write) is cut, not lost whole.
MAX_MESSAGE_CHARS = 256 * 1024 - 26


def endpoint_log_group(endpoint_name: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def endpoint_log_stream(variant_name: str, instance_id: str) -> str:
    """SageMaker names an instance's stream ``<variant>/<instance id>``."""
    return f"{variant_name}/{instance_id}"


def now_ms() -> int:
    return int(time.time() * 1000)


def write_log_events(
    session: Session,
    *,
    account_id: int,
    region: str,
    group_name: str,
    stream_name: str,
    events: Sequence[NewLogEvent],
    retention_in_days: int,
) -> None:
    """Append ``events`` to the stream, creating the group and the stream on first use."""
    if not events:
        return
    group = ensure_log_group(
        session, account_id=account_id, region=region, name=group_name, retention_in_days=retention_in_days
    )
    stream = ensure_log_stream(session, group_id=group.id, name=stream_name)
    trimmed = [NewLogEvent(event.timestamp, event.message[:MAX_MESSAGE_CHARS]) for event in events]
    append_log_events(session, group=group, stream=stream, events=trimmed, now_ms=now_ms())
