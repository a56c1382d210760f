"""Repository functions for optimization jobs on Postgres (each test rolled back)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.errors import NameAlreadyExistsError
from db.models.job_event import JobEvent
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.listing import PageRequest, SortKey, TimeRange
from db.queries.optimization_job import (
    InvalidJobTransitionError,
    JobListFilter,
    count_active_optimization_jobs,
    delete_optimization_job,
    get_optimization_job_by_id,
    get_optimization_job_by_name,
    list_job_events,
    list_optimization_jobs,
    record_job_progress,
    set_job_output,
    set_job_task_id,
    transition_optimization_job,
)
from db.types import utc_now
from tests.factories.accounts import AccountCredentials, create_account
from tests.factories.optimization_jobs import create_optimization_job
from tests.factories.rows import DEFAULT_REGION


@pytest.fixture
def owner(db_session: Session) -> AccountCredentials:
    return create_account(db_session)


def make_job(session: Session, owner: AccountCredentials, **overrides: Any) -> OptimizationJob:
    return create_optimization_job(
        session, account_id=owner.account_id, aws_account_id=owner.aws_account_id, **overrides
    )


def test_create_starts_in_starting_with_one_event(db_session: Session, owner: AccountCredentials) -> None:
    job = make_job(db_session, owner, name="Job-A")
    assert job.status is Status.STARTING
    assert job.name_key == "job-a"
    assert job.arn.endswith(":optimization-job/job-a")
    assert job.created_at == job.last_modified_at
    assert job.created_at.tzinfo is not None
    assert job.started_at is None
    assert job.ended_at is None
    events = list_job_events(db_session, job_id=job.id)
    assert [(event.status, event.message) for event in events] == [(Status.STARTING, "Job created")]


def test_names_are_unique_per_account_ignoring_case(db_session: Session, owner: AccountCredentials) -> None:
    make_job(db_session, owner, name="Same")
    with pytest.raises(NameAlreadyExistsError):
        make_job(db_session, owner, name="SAME")
    other = create_account(db_session)
    assert make_job(db_session, other, name="same").account_id == other.account_id
    found = get_optimization_job_by_name(
        db_session, account_id=owner.account_id, region=DEFAULT_REGION, name="sAmE"
    )
    assert found is not None
    assert found.name == "Same"


def test_transitions_set_times_and_record_events(db_session: Session, owner: AccountCredentials) -> None:
    job = make_job(db_session, owner)
    created = job.last_modified_at
    transition_optimization_job(db_session, job=job, status=Status.INPROGRESS, message="picked up")
    assert job.started_at is not None
    assert job.last_modified_at >= created
    started = job.started_at
    transition_optimization_job(db_session, job=job, status=Status.INPROGRESS, message="resumed")
    assert job.started_at == started, "a second INPROGRESS keeps the first start time"
    transition_optimization_job(
        db_session, job=job, status=Status.FAILED, message="boom", failure_reason="x" * 2000
    )
    assert job.ended_at is not None
    assert job.failure_reason == "x" * 1024
    assert job.last_message == "boom"
    statuses = [event.status for event in list_job_events(db_session, job_id=job.id)]
    assert statuses == [Status.STARTING, Status.INPROGRESS, Status.INPROGRESS, Status.FAILED]


@pytest.mark.parametrize("terminal", [Status.COMPLETED, Status.FAILED, Status.STOPPED])
def test_terminal_status_cannot_be_left(
    db_session: Session, owner: AccountCredentials, terminal: Status
) -> None:
    job = make_job(db_session, owner)
    path = {
        Status.COMPLETED: [Status.INPROGRESS, Status.COMPLETED],
        Status.FAILED: [Status.FAILED],
        Status.STOPPED: [Status.STOPPING, Status.STOPPED],
    }[terminal]
    for status in path:
        transition_optimization_job(db_session, job=job, status=status, message=str(status))
    with pytest.raises(InvalidJobTransitionError, match=f"cannot go from {terminal} to INPROGRESS"):
        transition_optimization_job(db_session, job=job, status=Status.INPROGRESS, message="late")
    assert job.status is terminal


def test_starting_cannot_complete_without_running(db_session: Session, owner: AccountCredentials) -> None:
    job = make_job(db_session, owner)
    with pytest.raises(InvalidJobTransitionError):
        transition_optimization_job(db_session, job=job, status=Status.COMPLETED, message="??")


def test_progress_records_an_event_only_when_the_stage_changes(
    db_session: Session, owner: AccountCredentials
) -> None:
    job = make_job(db_session, owner)
    before = utc_now()
    record_job_progress(db_session, job=job, stage="train", percent=10.0, eta_seconds=600, message="step 10")
    record_job_progress(db_session, job=job, stage="train", percent=20.0, eta_seconds=500, message="step 20")
    record_job_progress(
        db_session, job=job, stage="benchmark", percent=0.0, eta_seconds=None, message="bench"
    )
    stages = [event.stage for event in list_job_events(db_session, job_id=job.id)]
    assert stages == [None, "train", "benchmark"]
    assert job.stage == "benchmark"
    assert job.progress_percent == 0.0
    assert job.last_message == "bench"
    assert job.estimated_completion_at is None
    record_job_progress(db_session, job=job, stage="benchmark", percent=50.0, eta_seconds=60, message="half")
    assert job.estimated_completion_at is not None
    assert before + timedelta(seconds=59) < job.estimated_completion_at < utc_now() + timedelta(seconds=61)


@pytest.mark.parametrize(("percent", "eta"), [(-1.0, None), (100.5, None), (50.0, -3.0)])
def test_progress_rejects_impossible_values(
    db_session: Session, owner: AccountCredentials, percent: float, eta: float | None
) -> None:
    job = make_job(db_session, owner)
    with pytest.raises(ValueError, match="must"):
        record_job_progress(db_session, job=job, stage="train", percent=percent, eta_seconds=eta, message="x")


def test_task_id_output_and_lookup_by_id(db_session: Session, owner: AccountCredentials) -> None:
    job = make_job(db_session, owner)
    set_job_task_id(db_session, job=job, task_id="celery-123")
    set_job_output(db_session, job=job, optimization_output={"RecommendedInferenceImage": "img:1"})
    db_session.expire_all()
    reloaded = get_optimization_job_by_id(db_session, job_id=job.id, for_update=True)
    assert reloaded is not None
    assert reloaded.celery_task_id == "celery-123"
    assert reloaded.optimization_output == {"RecommendedInferenceImage": "img:1"}
    assert get_optimization_job_by_id(db_session, job_id=job.id + 10_000) is None


def test_delete_removes_the_events_too(db_session: Session, owner: AccountCredentials) -> None:
    job = make_job(db_session, owner)
    job_id = job.id
    delete_optimization_job(db_session, job=job)
    assert get_optimization_job_by_id(db_session, job_id=job_id) is None
    assert db_session.scalars(select(JobEvent).where(JobEvent.job_id == job_id)).all() == []


def test_active_job_count(db_session: Session, owner: AccountCredentials) -> None:
    running = make_job(db_session, owner)
    finished = make_job(db_session, owner)
    transition_optimization_job(db_session, job=finished, status=Status.FAILED, message="x")
    transition_optimization_job(db_session, job=running, status=Status.INPROGRESS, message="x")
    assert count_active_optimization_jobs(db_session, account_id=owner.account_id, region=DEFAULT_REGION) == 1


def test_list_filters_sorts_and_pages(db_session: Session, owner: AccountCredentials) -> None:
    start = utc_now() - timedelta(minutes=5)
    names = ["alpha-1", "beta-2", "alpha-3", "gamma-4", "Alpha-5"]
    jobs = []
    for index, name in enumerate(names):
        at = start + timedelta(seconds=index)
        jobs.append(make_job(db_session, owner, name=name, created_at=at, last_modified_at=at))
    transition_optimization_job(db_session, job=jobs[1], status=Status.FAILED, message="x")
    other = create_account(db_session)
    make_job(db_session, other, name="alpha-other")

    def names_of(page_request: PageRequest, filters: JobListFilter | None = None) -> list[str]:
        page = list_optimization_jobs(
            db_session, account_id=owner.account_id, region=DEFAULT_REGION, page=page_request, filters=filters
        )
        return [job.name for job in page.items]

    assert names_of(PageRequest(descending=False)) == names
    assert names_of(PageRequest(sort_key=SortKey.NAME, descending=True)) == [
        "gamma-4", "beta-2", "Alpha-5", "alpha-3", "alpha-1"
    ]  # fmt: skip
    assert names_of(PageRequest(), JobListFilter(name_contains="ALPHA")) == ["Alpha-5", "alpha-3", "alpha-1"]
    assert names_of(PageRequest(), JobListFilter(status=Status.FAILED)) == ["beta-2"]
    assert names_of(PageRequest(), JobListFilter(optimization_contains="decoding")) == names[::-1]
    assert names_of(PageRequest(), JobListFilter(optimization_contains="Quantization")) == []
    window = TimeRange(after=jobs[0].created_at, before=jobs[3].created_at)
    assert names_of(PageRequest(descending=False), JobListFilter(created=window)) == ["beta-2", "alpha-3"]
    modified = TimeRange(after=jobs[4].created_at)
    assert names_of(PageRequest(), JobListFilter(last_modified=modified)) == ["beta-2"]

    seen: list[str] = []
    request = PageRequest(sort_key=SortKey.STATUS, descending=False, limit=2)
    while True:
        page = list_optimization_jobs(
            db_session, account_id=owner.account_id, region=DEFAULT_REGION, page=request
        )
        seen.extend(job.name for job in page.items)
        if page.next_cursor is None:
            break
        assert len(page.items) == 2
        request = PageRequest(sort_key=SortKey.STATUS, descending=False, limit=2, cursor=page.next_cursor)
    assert seen[0] == "beta-2"  # FAILED sorts before STARTING
    assert sorted(seen) == sorted(names)
