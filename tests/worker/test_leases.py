"""Leases on the real database: who may run an INPROGRESS job, and what the reaper does with lost ones."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import (
    delete_optimization_job,
    get_optimization_job_by_id,
    list_job_events,
    record_job_progress,
)
from db.session import session_scope
from db.settings import Settings
from db.types import utc_now
from tests.factories.accounts import create_account
from tests.factories.optimization_jobs import create_optimization_job
from worker.job_store import REQUEUE_STAGE, RESUME_STAGE, JobStore
from worker.reaper import reap_lost_jobs, requeue_starting_jobs

SessionFactory = sessionmaker[Session]
LEASE = 30.0
CREATED: list[int] = []


@pytest.fixture
def store(worker_session_factory: SessionFactory) -> JobStore:
    return JobStore(worker_session_factory)


@pytest.fixture(autouse=True)
def _remove_jobs(worker_session_factory: SessionFactory) -> Iterator[None]:
    """These jobs are rows in odd states, never run: a worker started by a later test in this
    session (its reaper re-queues STARTING and lost jobs) must not find them."""
    yield
    with session_scope(worker_session_factory) as session:
        for job_id in CREATED:
            job = get_optimization_job_by_id(session, job_id=job_id)
            if job is not None:
                delete_optimization_job(session, job=job)
    CREATED.clear()


@pytest.fixture
def settings(worker_settings: Settings) -> Settings:
    return worker_settings.model_copy(update={"job_lease_seconds": LEASE, "max_job_attempts": 3})


def _job(
    factory: SessionFactory,
    status: Status,
    *,
    heartbeat_age: float,
    task_id: str | None = "task-1",
    resumes: int = 0,
) -> int:
    """A job in ``status`` whose worker last sent a heartbeat ``heartbeat_age`` seconds ago."""
    with session_scope(factory) as session:
        owner = create_account(session)
        job = create_optimization_job(
            session, account_id=owner.account_id, aws_account_id=owner.aws_account_id, celery_task_id=task_id
        )
        for _ in range(resumes):
            record_job_progress(session, job=job, stage="train", percent=10.0, eta_seconds=None, message="x")
            record_job_progress(
                session, job=job, stage=RESUME_STAGE, percent=10.0, eta_seconds=None, message="r"
            )
        job.status = status
        job.started_at = utc_now() - timedelta(seconds=heartbeat_age + 60)
        job.progress_updated_at = utc_now() - timedelta(seconds=heartbeat_age)
        CREATED.append(job.id)
        return job.id


def _row(factory: SessionFactory, job_id: int) -> Any:
    with session_scope(factory) as session:
        job = get_optimization_job_by_id(session, job_id=job_id)
        assert job is not None
        return job, [(event.stage, event.message) for event in list_job_events(session, job_id=job_id)]


class Queue:
    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []

    def __call__(self, job_id: int, task_id: str) -> None:
        self.sent.append((job_id, task_id))


# ---------------------------------------------------------------------------- claims


def test_a_delivery_replaced_by_the_reaper_is_dropped(
    store: JobStore, worker_session_factory: SessionFactory
) -> None:
    job_id = _job(worker_session_factory, Status.INPROGRESS, heartbeat_age=3600, task_id="new-task")
    claim = store.claim(job_id, worker_name="w", task_id="old-task", lease_seconds=LEASE)
    assert claim.job is None
    assert claim.wait_seconds == 0


def test_a_redelivery_waits_out_the_lease_of_a_worker_that_may_be_alive(
    store: JobStore, worker_session_factory: SessionFactory
) -> None:
    job_id = _job(worker_session_factory, Status.INPROGRESS, heartbeat_age=10)
    claim = store.claim(job_id, worker_name="w", task_id="task-1", lease_seconds=LEASE)
    assert claim.job is None
    assert 19 < claim.wait_seconds < 22
    assert claim.heartbeat is not None

    # The other worker renewed its heartbeat meanwhile: it is alive, this delivery is dropped.
    assert store.renew_lease(job_id, task_id="task-1").superseded is False
    again = store.claim(
        job_id, worker_name="w", task_id="task-1", lease_seconds=LEASE, previous_heartbeat=claim.heartbeat
    )
    assert again.job is None
    assert again.wait_seconds == 0


def test_a_redelivery_resumes_a_job_whose_lease_ran_out(
    store: JobStore, worker_session_factory: SessionFactory
) -> None:
    job_id = _job(worker_session_factory, Status.INPROGRESS, heartbeat_age=LEASE + 5)
    claim = store.claim(job_id, worker_name="w2", task_id="task-1", lease_seconds=LEASE)
    assert claim.job is not None
    job, events = _row(worker_session_factory, job_id)
    assert job.stage == RESUME_STAGE
    assert events[-1] == (RESUME_STAGE, "Job resumed by worker w2 after its previous worker was lost")


def test_the_last_allowed_resume_fails_the_job_instead(
    store: JobStore, worker_session_factory: SessionFactory
) -> None:
    job_id = _job(worker_session_factory, Status.INPROGRESS, heartbeat_age=LEASE + 5, resumes=2)
    assert (
        store.claim(job_id, worker_name="w", task_id="task-1", lease_seconds=LEASE, max_attempts=3).job
        is None
    )
    job, _ = _row(worker_session_factory, job_id)
    assert job.status is Status.FAILED
    assert job.failure_reason == (
        "The job's worker was lost 3 times (it stopped sending heartbeats); giving up after 3 attempts"
    )


def test_a_run_whose_job_was_taken_over_learns_it_from_its_heartbeat(
    store: JobStore, worker_session_factory: SessionFactory
) -> None:
    job_id = _job(worker_session_factory, Status.INPROGRESS, heartbeat_age=1, task_id="task-2")
    state = store.renew_lease(job_id, task_id="task-1")
    assert state.superseded
    assert state.stop_requested


# ---------------------------------------------------------------------------- the reaper


def test_the_reaper_requeues_a_lost_job_under_a_new_task_id(
    store: JobStore, settings: Settings, worker_session_factory: SessionFactory
) -> None:
    lost = _job(worker_session_factory, Status.INPROGRESS, heartbeat_age=LEASE + 5)
    alive = _job(worker_session_factory, Status.INPROGRESS, heartbeat_age=2)
    queue = Queue()

    reaped = reap_lost_jobs(store, settings, queue)

    assert (lost, "requeue") in [(item.job_id, item.action) for item in reaped]
    assert alive not in [item.job_id for item in reaped]
    [(job_id, task_id)] = [sent for sent in queue.sent if sent[0] == lost]
    job, events = _row(worker_session_factory, lost)
    assert job.status is Status.INPROGRESS
    assert job.celery_task_id == task_id != "task-1"
    assert job.stage == REQUEUE_STAGE
    assert "queued again to resume from its last checkpoint" in events[-1][1]
    # The new message is claimed at once: the reaper already found the old worker gone.
    claim = store.claim(job_id, worker_name="w", task_id=task_id, lease_seconds=LEASE)
    assert claim.job is not None
    # ... and the old message, should Redis hand it back after its visibility timeout, is dropped.
    assert store.claim(job_id, worker_name="w", task_id="task-1", lease_seconds=LEASE).job is None


def test_the_reaper_fails_a_job_that_keeps_losing_its_worker(
    store: JobStore, settings: Settings, worker_session_factory: SessionFactory
) -> None:
    job_id = _job(worker_session_factory, Status.INPROGRESS, heartbeat_age=LEASE + 5, resumes=2)
    queue = Queue()
    reap_lost_jobs(store, settings, queue)
    job, _ = _row(worker_session_factory, job_id)
    assert job.status is Status.FAILED
    assert job.failure_reason.startswith("The job's worker was lost 3 times")
    assert job_id not in [sent[0] for sent in queue.sent]


def test_the_reaper_confirms_a_stop_nobody_can_confirm_any_more(
    store: JobStore, settings: Settings, worker_session_factory: SessionFactory
) -> None:
    job_id = _job(worker_session_factory, Status.STOPPING, heartbeat_age=LEASE + 5)
    with session_scope(worker_session_factory) as session:
        job = get_optimization_job_by_id(session, job_id=job_id)
        assert job is not None
        job.last_modified_at = utc_now() - timedelta(seconds=LEASE + 5)
    reap_lost_jobs(store, settings, Queue())
    job, _ = _row(worker_session_factory, job_id)
    assert job.status is Status.STOPPED
    assert job.failure_reason is None


def test_worker_start_up_requeues_every_starting_job(
    store: JobStore, worker_session_factory: SessionFactory
) -> None:
    job_id = _job(worker_session_factory, Status.STARTING, heartbeat_age=0, task_id=None)
    queue = Queue()
    assert job_id in requeue_starting_jobs(store, queue)
    assert job_id in [sent[0] for sent in queue.sent]
