"""The services never commit; the caller's unit of work does, and runs queue/stop only after it.

These use really committing sessions (``committed_session_factory``): whether a row survives
a rollback, or is visible from another connection, is the point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from core.principal import Principal
from core.sagemaker.shapes.optimization_jobs import CreateOptimizationJobRequest
from core.sagemaker.shapes.sagemaker_models import CreateModelInput
from core.services.optimization_jobs import create_job, delete_job, stop_job
from core.services.sagemaker_models import create_model, delete_model
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import get_optimization_job_by_id, transition_optimization_job
from db.queries.role import role_arn
from db.queries.sagemaker_model import get_sagemaker_model_by_name
from db.session import UnitOfWork, unit_of_work
from tests.factories.accounts import TEST_ROLE_NAME, create_account
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.factories.rows import DEFAULT_REGION
from tests.factories.sagemaker_models import create_model_request

SessionFactory = sessionmaker[Session]


class CommitFailedError(Exception):
    pass


class WatchingDispatcher:
    """Records each call and what another connection saw of the job at that moment."""

    def __init__(self, factory: SessionFactory) -> None:
        self.factory = factory
        self.enqueued: list[tuple[int, Status | None]] = []
        self.stopped: list[tuple[int, Status | None]] = []

    def _committed_status(self, job_id: int) -> Status | None:
        with self.factory() as session:
            job = get_optimization_job_by_id(session, job_id=job_id)
            return None if job is None else job.status

    def enqueue_optimization_job(self, job_id: int) -> str:
        self.enqueued.append((job_id, self._committed_status(job_id)))
        return f"task-{job_id}"

    def request_stop(self, job_id: int, task_id: str | None) -> None:
        self.stopped.append((job_id, self._committed_status(job_id)))


@pytest.fixture
def principal(committed_session_factory: SessionFactory) -> Principal:
    with unit_of_work(committed_session_factory) as unit:
        owner = create_account(unit.session)
    return Principal(owner.account_id, owner.aws_account_id, owner.access_key_id, "us-west-2")


def job_request(principal: Principal) -> CreateOptimizationJobRequest:
    role = role_arn(aws_account_id=principal.aws_account_id, name=TEST_ROLE_NAME)
    return CreateOptimizationJobRequest.model_validate(create_optimization_job_request(RoleArn=role))


def model_request(principal: Principal) -> CreateModelInput:
    role = role_arn(aws_account_id=principal.aws_account_id, name=TEST_ROLE_NAME)
    return CreateModelInput.model_validate(create_model_request(ExecutionRoleArn=role))


def committed_job(
    factory: SessionFactory, principal: Principal, dispatcher: WatchingDispatcher, status: Status
) -> OptimizationJob:
    with unit_of_work(factory) as unit:
        job = create_job(
            unit,
            principal=principal,
            request=job_request(principal),
            dispatcher=dispatcher,
            max_active_jobs=100,
        )
    if status is not Status.STARTING:
        with unit_of_work(factory) as unit:
            row = unit.session.get(OptimizationJob, job.id)
            assert row is not None
            transition_optimization_job(unit.session, job=row, status=status, message="test")
    return job


def load_job(factory: SessionFactory, job_id: int) -> OptimizationJob | None:
    with factory() as session:
        return get_optimization_job_by_id(session, job_id=job_id)


@pytest.fixture
def watched_session(committed_session_factory: SessionFactory) -> Iterator[tuple[Session, list[str]]]:
    """A session whose connection records every real COMMIT (savepoint releases are not commits)."""
    commits: list[str] = []
    with committed_session_factory() as session:
        event.listen(session.connection(), "commit", lambda _connection: commits.append("COMMIT"))
        yield session, commits


def test_no_service_commits_a_rolled_back_transaction(
    committed_session_factory: SessionFactory,
    principal: Principal,
    watched_session: tuple[Session, list[str]],
) -> None:
    factory = committed_session_factory
    dispatcher = WatchingDispatcher(factory)
    running = committed_job(factory, principal, dispatcher, Status.INPROGRESS)
    failed = committed_job(factory, principal, dispatcher, Status.FAILED)
    kept_model = model_request(principal)
    with unit_of_work(factory) as unit:
        create_model(unit.session, principal=principal, request=kept_model)
    dispatcher.enqueued.clear()

    session, commits = watched_session
    unit = UnitOfWork(session)
    new_model = model_request(principal)
    new_job = create_job(
        unit, principal=principal, request=job_request(principal), dispatcher=dispatcher, max_active_jobs=100
    )
    create_model(session, principal=principal, request=new_model)
    stop_job(unit, principal=principal, name=running.name, dispatcher=dispatcher)
    delete_job(session, principal=principal, name=failed.name)
    delete_model(session, principal=principal, name=kept_model.model_name)
    unit.rollback()

    assert commits == []
    assert dispatcher.enqueued == []
    assert dispatcher.stopped == []
    assert load_job(factory, new_job.id) is None
    with factory() as other:
        assert (
            get_sagemaker_model_by_name(
                other, account_id=principal.account_id, region=DEFAULT_REGION, name=new_model.model_name
            )
            is None
        )
        assert get_sagemaker_model_by_name(
            other, account_id=principal.account_id, region=DEFAULT_REGION, name=kept_model.model_name
        )
    stopped, deleted = load_job(factory, running.id), load_job(factory, failed.id)
    assert stopped is not None
    assert stopped.status is Status.INPROGRESS
    assert deleted is not None


def test_a_job_is_queued_only_once_its_row_is_committed(
    committed_session_factory: SessionFactory, principal: Principal
) -> None:
    dispatcher = WatchingDispatcher(committed_session_factory)
    with unit_of_work(committed_session_factory) as unit:
        job = create_job(
            unit,
            principal=principal,
            request=job_request(principal),
            dispatcher=dispatcher,
            max_active_jobs=100,
        )
        assert dispatcher.enqueued == []
    # The dispatcher ran after the commit: another connection (a worker) already saw the job.
    assert dispatcher.enqueued == [(job.id, Status.STARTING)]
    # ... and the task id it returned was committed by the same unit of work.
    committed = load_job(committed_session_factory, job.id)
    assert committed is not None
    assert committed.celery_task_id == f"task-{job.id}"


def _fail_the_commit(unit: UnitOfWork) -> None:
    def fail(_session: Session) -> None:
        raise CommitFailedError

    event.listen(unit.session, "before_commit", fail)


def _fail_the_request(_unit: UnitOfWork) -> None:
    raise CommitFailedError


def run_then_fail(
    factory: SessionFactory, work: Callable[[UnitOfWork], None], failure: Callable[[UnitOfWork], None]
) -> None:
    """A request's unit of work that does ``work``, then fails as ``failure`` makes it fail."""
    with unit_of_work(factory) as unit:
        work(unit)
        failure(unit)


@pytest.mark.parametrize(
    "failure", [_fail_the_commit, _fail_the_request], ids=["commit-fails", "request-fails"]
)
def test_nothing_is_queued_when_the_job_is_not_committed(
    committed_session_factory: SessionFactory, principal: Principal, failure: Callable[[UnitOfWork], None]
) -> None:
    dispatcher = WatchingDispatcher(committed_session_factory)
    created: list[OptimizationJob] = []

    def create(unit: UnitOfWork) -> None:
        created.append(
            create_job(
                unit,
                principal=principal,
                request=job_request(principal),
                dispatcher=dispatcher,
                max_active_jobs=100,
            )
        )

    with pytest.raises(CommitFailedError):
        run_then_fail(committed_session_factory, create, failure)
    assert dispatcher.enqueued == []
    (job,) = created
    assert load_job(committed_session_factory, job.id) is None


def test_a_stop_is_sent_only_once_stopping_is_committed(
    committed_session_factory: SessionFactory, principal: Principal
) -> None:
    factory = committed_session_factory
    dispatcher = WatchingDispatcher(factory)
    job = committed_job(factory, principal, dispatcher, Status.STARTING)

    def stop(unit: UnitOfWork) -> None:
        stop_job(unit, principal=principal, name=job.name, dispatcher=dispatcher)

    with pytest.raises(CommitFailedError):
        run_then_fail(factory, stop, _fail_the_commit)
    assert dispatcher.stopped == []
    unchanged = load_job(factory, job.id)
    assert unchanged is not None
    assert unchanged.status is Status.STARTING

    with unit_of_work(factory) as unit:
        stop(unit)
        assert dispatcher.stopped == []
    assert dispatcher.stopped == [(job.id, Status.STOPPING)]
