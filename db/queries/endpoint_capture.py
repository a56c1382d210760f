"""Captured invocations: the api adds them, the endpoint's supervisor takes them to S3."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from db.models.endpoint_capture import EndpointCapture


def add_endpoint_captures(session: Session, *, captures: Sequence[tuple[int, str]]) -> None:
    """(endpoint id, line) pairs; an endpoint deleted meanwhile takes its captures with it."""
    session.add_all(EndpointCapture(endpoint_id=endpoint_id, line=line) for endpoint_id, line in captures)
    session.flush()


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
