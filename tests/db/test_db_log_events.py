"""Log events: created groups and streams, stream time bounds, and the retention limit."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.services.log_writer import now_ms, write_log_events
from db.models.log_event import LogEvent
from db.queries.log_event import DAY_MS, NewLogEvent
from db.queries.log_group import get_log_group
from db.queries.log_stream import get_log_stream
from tests.factories.accounts import create_account


def test_events_older_than_the_retention_are_dropped_as_new_ones_arrive(db_session: Session) -> None:
    account = create_account(db_session)
    now = now_ms()

    def write(*events: NewLogEvent) -> None:
        write_log_events(
            db_session,
            account_id=account.account_id,
            region="us-west-2",
            group_name="/aws/sagemaker/OptimizationJobs",
            stream_name="job1",
            events=events,
            retention_in_days=7,
        )

    write(NewLogEvent(now - 8 * DAY_MS, "too old"), NewLogEvent(now - 6 * DAY_MS, "kept"))
    write(NewLogEvent(now, "new"))
    group = get_log_group(
        db_session, account_id=account.account_id, region="us-west-2", name="/aws/sagemaker/OptimizationJobs"
    )
    assert group is not None
    kept = select(LogEvent.message).where(LogEvent.log_group_id == group.id).order_by(LogEvent.timestamp)
    assert db_session.scalars(kept).all() == ["kept", "new"]
    assert group.retention_in_days == 7
    stream = get_log_stream(db_session, group_id=group.id, name="job1")
    assert stream is not None
    assert (stream.first_event_timestamp, stream.last_event_timestamp) == (now - 8 * DAY_MS, now)
    assert (
        get_log_group(
            db_session,
            account_id=account.account_id,
            region="eu-west-1",
            name="/aws/sagemaker/OptimizationJobs",
        )
        is None
    )
