"""Queries on log streams (always inside one group, which carries the account and region)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.models.log_stream import LogStream


def get_log_stream(session: Session, *, group_id: int, name: str) -> LogStream | None:
    return session.scalars(
        select(LogStream).where(LogStream.log_group_id == group_id, LogStream.name == name)
    ).one_or_none()


def ensure_log_stream(session: Session, *, group_id: int, name: str) -> LogStream:
    existing = get_log_stream(session, group_id=group_id, name=name)
    if existing is not None:
        return existing
    stream = LogStream(log_group_id=group_id, name=name)
    try:
        with session.begin_nested():
            session.add(stream)
    except IntegrityError:
        found = get_log_stream(session, group_id=group_id, name=name)
        assert found is not None, "the unique key said the stream exists"
        return found
    return stream


def list_log_streams(
    session: Session,
    *,
    group_id: int,
    name_prefix: str | None = None,
    by_last_event: bool = False,
    descending: bool = False,
    offset: int = 0,
    limit: int,
) -> list[LogStream]:
    """One page of a group's streams by name or by last event time (``offset`` is the token)."""
    query = select(LogStream).where(LogStream.log_group_id == group_id)
    if name_prefix:
        query = query.where(LogStream.name.startswith(name_prefix, autoescape=True))
    if by_last_event:
        # Streams without events sort first ascending, last descending, on both backends.
        empty_first = LogStream.last_event_timestamp.is_(None)
        key = LogStream.last_event_timestamp
        order = (
            (empty_first.asc(), key.desc(), LogStream.id.desc())
            if descending
            else (empty_first.desc(), key.asc(), LogStream.id.asc())
        )
        query = query.order_by(*order)
    else:
        name = LogStream.name
        query = query.order_by(*((name.desc(), LogStream.id.desc()) if descending else (name, LogStream.id)))
    return list(session.scalars(query.offset(offset).limit(limit)))


def streams_by_id(session: Session, *, group_id: int) -> dict[int, str]:
    """Stream id -> name for a group (to name the events of a group-wide filter)."""
    rows = session.execute(select(LogStream.id, LogStream.name).where(LogStream.log_group_id == group_id))
    # A Result has .keys(), so dict(result) would take it for a mapping.
    return dict(rows.all())
