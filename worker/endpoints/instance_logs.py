"""Where an endpoint instance's output goes: ``/aws/sagemaker/Endpoints/<endpoint>``, one stream
per instance named ``<variant>/<instance id>``, as SageMaker names them."""

from __future__ import annotations

from core.services.log_writer import endpoint_log_group, endpoint_log_stream
from db.queries.endpoint import get_endpoint_by_id
from db.session import session_scope
from db.settings import get_settings
from worker.log_buffer import LogBuffer, LogTarget


def instance_id(endpoint_id: int, generation: int, ordinal: int) -> str:
    """A stable EC2-style id (``i-`` and 16 hex digits) for one instance of one rollout."""
    return f"i-{endpoint_id:08x}{generation:04x}{ordinal:04x}"


def instance_log_buffers(endpoint_id: int, generation: int, variant_name: str, count: int) -> list[LogBuffer]:
    with session_scope() as session:
        endpoint = get_endpoint_by_id(session, endpoint_id=endpoint_id)
        owner = None if endpoint is None else (endpoint.account_id, endpoint.region, endpoint.name)
    retention = get_settings().log_retention_days
    buffers: list[LogBuffer] = []
    for ordinal in range(count):
        stream = endpoint_log_stream(variant_name, instance_id(endpoint_id, generation, ordinal))
        if owner is None:  # deleted meanwhile: the supervisor stops at its next check
            buffers.append(DiscardingLogBuffer())
            continue
        account_id, region, name = owner
        target = LogTarget(account_id, region, endpoint_log_group(name), stream, retention)
        buffers.append(LogBuffer(session_scope, target))
    return buffers


class DiscardingLogBuffer(LogBuffer):
    def __init__(self) -> None:
        super().__init__(session_scope, LogTarget(0, "", "", "", 1))

    def write(self, message: str, timestamp_ms: int | None = None) -> None:
        return None
