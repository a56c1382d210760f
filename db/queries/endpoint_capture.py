"""Captured invocations: the api adds them, the endpoint's supervisor takes them to S3."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from db.models.endpoint import Endpoint
from db.models.endpoint_capture import EndpointCapture
from db.types import utc_now

# Rows per INSERT: well under Postgres' 65,535 and SQLite's 32,766 bound parameters.
_CHUNK = 1000


class CaptureRow(NamedTuple):
    endpoint_id: int
    # The line's eventMetadata.eventId: the idempotency key of a replayed line.
    event_id: str
    line: str


def add_endpoint_captures(session: Session, *, captures: Sequence[CaptureRow]) -> None:
    """Store captured lines once each: a line whose event id is stored already is skipped (a
    replay), and so is a line of an endpoint deleted meanwhile (its captures went with it)."""
    endpoint_ids = {capture.endpoint_id for capture in captures}
    if not endpoint_ids:
        return
    live = set(session.scalars(select(Endpoint.id).where(Endpoint.id.in_(endpoint_ids))))
    now = utc_now()
    rows = list(
        {
            capture.event_id: {
                "endpoint_id": capture.endpoint_id,
                "event_id": capture.event_id,
                "line": capture.line,
                "captured_at": now,
            }
            for capture in captures
            if capture.endpoint_id in live
        }.values()
    )
    insert: Any = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    for start in range(0, len(rows), _CHUNK):
        statement = insert(EndpointCapture).values(rows[start : start + _CHUNK])
        session.execute(statement.on_conflict_do_nothing(index_elements=["event_id"]))


def pending_endpoint_captures(session: Session, *, endpoint_id: int, limit: int) -> list[EndpointCapture]:
    return list(
        session.scalars(
            select(EndpointCapture)
            .where(EndpointCapture.endpoint_id == endpoint_id)
            .order_by(EndpointCapture.id)
            .limit(limit)
        )
    )


def delete_endpoint_captures(session: Session, *, ids: Sequence[int]) -> None:
    session.execute(delete(EndpointCapture).where(EndpointCapture.id.in_(list(ids))))
