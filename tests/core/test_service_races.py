"""Parallel Stop/Delete calls on one resource: exactly one wins, on Postgres and on SQLite.

Each caller runs in its own thread with its own session and commits, as parallel api
requests do. SQLite has no SELECT ... FOR UPDATE, so the services must change state with
conditional statements (UPDATE/DELETE ... WHERE status IN ...) and check the row count.
To make the race certain rather than likely, every caller is held just before its first
write of the row until all callers have read it (``before_first_write``).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from core.principal import Principal
from core.sagemaker.errors import ResourceNotFound, ValidationException
from core.services.optimization_jobs import delete_job, stop_job
from core.services.sagemaker_models import delete_model
from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import (
    get_optimization_job_by_id,
    list_job_events,
    transition_optimization_job,
)
from db.queries.sagemaker_model import get_sagemaker_model_by_name
from db.session import create_db_engine, create_session_factory, unit_of_work
from migrations.runner import upgrade_to_head
from tests.factories.accounts import create_account
from tests.factories.optimization_jobs import create_optimization_job
from tests.factories.rows import DEFAULT_REGION
from tests.factories.sagemaker_models import create_sagemaker_model

CALLERS = 5
RACER_PREFIX = "racer-"
# The first write a Stop/Delete makes to the row it changes.
_ROW_WRITE = re.compile(r"\s*(UPDATE|DELETE FROM)\s+(optimization_jobs|sagemaker_models)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Database:
    engine: Engine
    factory: sessionmaker[Session]


@pytest.fixture(params=["postgres", "sqlite"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "postgres":
        engine: Engine = request.getfixturevalue("db_engine")
        yield Database(engine, request.getfixturevalue("committed_session_factory"))
        return
    # The embedded stack's database: a file in WAL mode, shared by several connections.
    url = f"sqlite:///{tmp_path / 'eaglenest.sqlite3'}"
    upgrade_to_head(url)
    with sqlite3.connect(tmp_path / "eaglenest.sqlite3") as connection:
        connection.execute("PRAGMA journal_mode=WAL")
    engine = create_db_engine(url)
    yield Database(engine, create_session_factory(engine))
    engine.dispose()


@pytest.fixture
def principal(database: Database) -> Principal:
    with unit_of_work(database.factory) as unit:
        owner = create_account(unit.session)
    return Principal(owner.account_id, owner.aws_account_id, owner.access_key_id, "us-west-2")


class RecordingDispatcher:
    def __init__(self) -> None:
        self.stops: list[int] = []

    def enqueue_optimization_job(self, job_id: int) -> str:
        raise AssertionError("nothing is created here")

    def request_stop(self, job_id: int, task_id: str | None) -> None:
        self.stops.append(job_id)


@contextmanager
def before_first_write(engine: Engine, action: Callable[[], None]) -> Iterator[None]:
    """Run ``action`` in each racing thread just before its first UPDATE/DELETE of the row."""
    done = threading.local()

    def hook(*args: Any) -> None:
        statement = args[2]
        racing = threading.current_thread().name.startswith(RACER_PREFIX)
        if racing and not getattr(done, "seen", False) and _ROW_WRITE.match(statement):
            done.seen = True
            action()

    event.listen(engine, "before_cursor_execute", hook)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", hook)


def all_callers_have_read(count: int) -> Callable[[], None]:
    barrier = threading.Barrier(count, timeout=5)

    def wait() -> None:
        # A caller that locked the row (SELECT ... FOR UPDATE on Postgres) keeps the others
        # from getting here; the barrier then breaks and everyone goes on.
        with suppress(threading.BrokenBarrierError):
            barrier.wait()

    return wait


def race(count: int, call: Callable[[], None]) -> list[BaseException | None]:
    """Run ``call`` in ``count`` threads at once; each one's exception, or None."""
    outcomes: list[BaseException | None] = [None] * count

    def run(index: int) -> None:
        try:
            call()
        except Exception as error:  # the outcome is what the test looks at
            outcomes[index] = error

    threads = [
        threading.Thread(target=run, args=(index,), name=f"{RACER_PREFIX}{index}") for index in range(count)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def job_in(database: Database, principal: Principal, *path: Status) -> tuple[int, str]:
    with unit_of_work(database.factory) as unit:
        job = create_optimization_job(
            unit.session, account_id=principal.account_id, aws_account_id=principal.aws_account_id
        )
        for status in path:
            transition_optimization_job(unit.session, job=job, status=status, message="test")
    return job.id, job.name


def losers_of_one_winner(outcomes: list[BaseException | None]) -> list[BaseException]:
    """The errors of the callers that lost, after checking that exactly one caller succeeded."""
    assert outcomes.count(None) == 1, outcomes
    return [outcome for outcome in outcomes if outcome is not None]


def test_parallel_deletes_of_a_job_have_one_winner(database: Database, principal: Principal) -> None:
    job_id, name = job_in(database, principal, Status.FAILED)

    def delete() -> None:
        with unit_of_work(database.factory) as unit:
            delete_job(unit.session, principal=principal, name=name)

    with before_first_write(database.engine, all_callers_have_read(CALLERS)):
        outcomes = race(CALLERS, delete)

    for loser in losers_of_one_winner(outcomes):
        assert isinstance(loser, ResourceNotFound), loser
        assert str(loser) == f'Could not find optimization job "{name}".'
    with database.factory() as session:
        assert get_optimization_job_by_id(session, job_id=job_id) is None


def test_parallel_deletes_of_a_model_have_one_winner(database: Database, principal: Principal) -> None:
    with unit_of_work(database.factory) as unit:
        name = create_sagemaker_model(
            unit.session, account_id=principal.account_id, aws_account_id=principal.aws_account_id
        ).name

    def delete() -> None:
        with unit_of_work(database.factory) as unit:
            delete_model(unit.session, principal=principal, name=name)

    with before_first_write(database.engine, all_callers_have_read(CALLERS)):
        outcomes = race(CALLERS, delete)

    for loser in losers_of_one_winner(outcomes):
        assert isinstance(loser, ValidationException), loser
        assert str(loser).startswith("Could not find model"), loser
    with database.factory() as session:
        assert (
            get_sagemaker_model_by_name(
                session, account_id=principal.account_id, region=DEFAULT_REGION, name=name
            )
            is None
        )


def test_parallel_stops_record_one_stopping_event(database: Database, principal: Principal) -> None:
    job_id, name = job_in(database, principal, Status.INPROGRESS)
    dispatcher = RecordingDispatcher()

    def stop() -> None:
        with unit_of_work(database.factory) as unit:
            stop_job(unit, principal=principal, name=name, dispatcher=dispatcher)

    with before_first_write(database.engine, all_callers_have_read(CALLERS)):
        outcomes = race(CALLERS, stop)

    assert outcomes == [None] * CALLERS  # StopOptimizationJob on a STOPPING job succeeds
    assert dispatcher.stops == [job_id]
    with database.factory() as session:
        job = get_optimization_job_by_id(session, job_id=job_id)
        assert job is not None
        assert job.status is Status.STOPPING
        statuses = [event.status for event in list_job_events(session, job_id=job_id)]
    assert statuses == [Status.STARTING, Status.INPROGRESS, Status.STOPPING]


def test_a_stop_never_reopens_a_job_that_ended_meanwhile(database: Database, principal: Principal) -> None:
    job_id, name = job_in(database, principal, Status.INPROGRESS)
    dispatcher = RecordingDispatcher()

    def complete_elsewhere() -> None:
        # The worker finishes the job after the stop read it as INPROGRESS.
        def complete() -> None:
            with unit_of_work(database.factory) as unit:
                job = get_optimization_job_by_id(unit.session, job_id=job_id, for_update=True)
                assert job is not None
                transition_optimization_job(unit.session, job=job, status=Status.COMPLETED, message="done")

        worker = threading.Thread(target=complete, name="worker")
        worker.start()
        worker.join(timeout=30)

    def stop() -> None:
        with unit_of_work(database.factory) as unit:
            stop_job(unit, principal=principal, name=name, dispatcher=dispatcher)

    with before_first_write(database.engine, complete_elsewhere):
        (outcome,) = race(1, stop)

    assert isinstance(outcome, ValidationException), outcome
    assert str(outcome) == (
        f'The optimization job "{name}" is in status COMPLETED; only jobs in STARTING or '
        "INPROGRESS status can be stopped."
    )
    assert dispatcher.stops == []
    with database.factory() as session:
        job = get_optimization_job_by_id(session, job_id=job_id)
        assert job is not None
        assert job.status is Status.COMPLETED
        statuses = [event.status for event in list_job_events(session, job_id=job_id)]
    assert statuses == [Status.STARTING, Status.INPROGRESS, Status.COMPLETED]
