"""Writing and reading log events. Positions are ``(timestamp, id)`` pairs: events sort by
event time, and the row id breaks ties in the order they were stored."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, delete, or_, select, tuple_
from sqlalchemy.orm import Session

from db.models.log_event import LogEvent
from db.models.log_group import LogGroup
from db.models.log_stream import LogStream

Position = tuple[int, int]
DAY_MS = 86_400_000


@dataclass(frozen=True)
class NewLogEvent:
    timestamp: int  # event time, ms since the epoch
    message: str


def append_log_events(
    session: Session, *, group: LogGroup, stream: LogStream, events: Sequence[NewLogEvent], now_ms: int
) -> None:
    """Store ``events`` in ``stream``, then drop the group's events older than its retention."""
    if not events:
        return
    session.add_all(
        LogEvent(
            log_stream_id=stream.id,
            log_group_id=group.id,
            timestamp=event.timestamp,
            ingestion_time=now_ms,
            message=event.message,
        )
        for event in events
    )
    first = min(event.timestamp for event in events)
    last = max(event.timestamp for event in events)
    if stream.first_event_timestamp is None or first < stream.first_event_timestamp:
        stream.first_event_timestamp = first
    if stream.last_event_timestamp is None or last > stream.last_event_timestamp:
        stream.last_event_timestamp = last
    stream.last_ingestion_time = now_ms
    # An indexed range delete on (log_group_id, timestamp): cheap, and retention needs no sweeper.
    session.execute(
        delete(LogEvent).where(
            LogEvent.log_group_id == group.id,
            LogEvent.timestamp < now_ms - group.retention_in_days * DAY_MS,
        )
    )
    session.flush()


def _time_range(start_time: int | None, end_time: int | None) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if start_time is not None:
        conditions.append(LogEvent.timestamp >= start_time)
    if end_time is not None:
        conditions.append(LogEvent.timestamp <= end_time)
    return conditions


def read_stream_events(
    session: Session,
    *,
    stream_id: int,
    after: Position | None = None,
    before: Position | None = None,
    start_time: int | None = None,
    end_time: int | None = None,
    limit: int,
) -> list[LogEvent]:
    """Up to ``limit`` events in time order: the first ones after ``after``, or else the last
    ones before ``before`` (the newest of the stream when both are None)."""
    position = tuple_(LogEvent.timestamp, LogEvent.id)
    query = select(LogEvent).where(LogEvent.log_stream_id == stream_id, *_time_range(start_time, end_time))
    if after is not None:
        query = query.where(position > tuple_(*after)).order_by(LogEvent.timestamp, LogEvent.id)
        return list(session.scalars(query.limit(limit)))
    if before is not None:
        query = query.where(position < tuple_(*before))
    newest_first = session.scalars(query.order_by(LogEvent.timestamp.desc(), LogEvent.id.desc()).limit(limit))
    return list(reversed(list(newest_first)))


def scan_group_events(
    session: Session,
    *,
    group_id: int,
    stream_ids: Sequence[int] | None,
    after: Position | None,
    start_time: int | None,
    end_time: int | None,
    must_contain: Sequence[str] = (),
    limit: int,
) -> list[LogEvent]:
    """The next ``limit`` events of a group (or of ``stream_ids`` in it) in time order.

    ``must_contain`` narrows the scan in SQL; LIKE is case-insensitive on SQLite, so the
    caller still checks each message exactly.
    """
    query = select(LogEvent).where(LogEvent.log_group_id == group_id, *_time_range(start_time, end_time))
    if stream_ids is not None:
        query = query.where(LogEvent.log_stream_id.in_(stream_ids))
    if after is not None:
        # Spelled out rather than a row-value comparison so the (group, timestamp, id) index serves it.
        query = query.where(
            or_(
                LogEvent.timestamp > after[0],
                and_(LogEvent.timestamp == after[0], LogEvent.id > after[1]),
            )
        )
    for term in must_contain:
        query = query.where(LogEvent.message.contains(term, autoescape=True))
    return list(session.scalars(query.order_by(LogEvent.timestamp, LogEvent.id).limit(limit)))
