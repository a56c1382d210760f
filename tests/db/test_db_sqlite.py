"""The embedded stack's backend: the same migrations and repository functions on SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.listing import PageRequest
from db.queries.optimization_job import list_optimization_jobs, transition_optimization_job
from db.session import create_db_engine, create_session_factory
from db.types import UtcDateTime
from migrations.runner import upgrade_to_head
from tests.factories.accounts import create_account
from tests.factories.optimization_jobs import create_optimization_job
from tests.factories.rows import DEFAULT_REGION


@pytest.fixture
def sqlite_session(tmp_path: Path) -> Iterator[Session]:
    url = f"sqlite:///{tmp_path / 'eaglenest.db'}"
    upgrade_to_head(url)
    engine = create_db_engine(url)
    with create_session_factory(engine)() as session:
        yield session
    engine.dispose()


def test_jobs_round_trip_with_json_and_aware_times(sqlite_session: Session) -> None:
    owner = create_account(sqlite_session)
    job = create_optimization_job(
        sqlite_session,
        account_id=owner.account_id,
        aws_account_id=owner.aws_account_id,
        optimization_environment={"EAGLE_TTT_STEPS": "3"},
    )
    transition_optimization_job(sqlite_session, job=job, status=Status.INPROGRESS, message="go")
    sqlite_session.commit()
    sqlite_session.expire_all()
    page = list_optimization_jobs(
        sqlite_session, account_id=owner.account_id, region=DEFAULT_REGION, page=PageRequest()
    )
    (loaded,) = page.items
    assert loaded.optimization_environment == {"EAGLE_TTT_STEPS": "3"}
    assert loaded.model_source == {"S3": {"S3Uri": "s3://models/llama/"}}
    assert loaded.status is Status.INPROGRESS
    assert loaded.started_at is not None
    assert loaded.started_at.tzinfo is UTC
    assert loaded.created_at.utcoffset() is not None


def test_foreign_keys_cascade_on_sqlite(sqlite_session: Session) -> None:
    owner = create_account(sqlite_session)
    job = create_optimization_job(
        sqlite_session, account_id=owner.account_id, aws_account_id=owner.aws_account_id
    )
    sqlite_session.commit()
    sqlite_session.delete(job)
    sqlite_session.commit()
    remaining = sqlite_session.execute(
        text("SELECT count(*) FROM job_events WHERE job_id = :id"), {"id": job.id}
    ).scalar_one()
    assert remaining == 0


def test_naive_datetimes_are_refused() -> None:
    column_type = UtcDateTime()
    dialect = create_db_engine("sqlite://").dialect
    with pytest.raises(ValueError, match="naive datetime"):
        column_type.process_bind_param(datetime(2026, 1, 1), dialect)
    aware = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert column_type.process_bind_param(aware, dialect) == datetime(2026, 1, 1, 12)
    assert column_type.process_result_value(datetime(2026, 1, 1, 12), dialect) == aware
