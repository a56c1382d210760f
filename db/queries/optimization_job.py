"""Repository functions for optimization jobs and their event history.

The api creates jobs (STARTING) and requests stops; the worker moves them on with
``transition_optimization_job`` and reports progress with ``record_job_progress``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, load_only
from sqlalchemy.orm.attributes import set_committed_value

from db.errors import NameAlreadyExistsError
from db.models.job_event import JobEvent
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import ACTIVE_STATUSES, OptimizationJobStatus
from db.queries.listing import (
    ANY_TIME,
    NamedTable,
    Page,
    PageRequest,
    SortColumn,
    SortKey,
    TimeRange,
    contains,
    list_named_rows,
)
from db.types import utc_now

_TABLE = NamedTable(
    what="optimization jobs",
    id_column=OptimizationJob.id,
    name_key=OptimizationJob.name_key,
    created_at=OptimizationJob.created_at,
    more_sorts={SortKey.STATUS: SortColumn(OptimizationJob.status)},
)

# Which status may follow which. Terminal statuses have no successor, so a late worker
# update can never resurrect a stopped, failed or completed job. Re-entering the same
# status is allowed (a resumed task reporting INPROGRESS again).
_ALLOWED_TRANSITIONS: dict[OptimizationJobStatus, frozenset[OptimizationJobStatus]] = {
    OptimizationJobStatus.STARTING: frozenset(
        {
            OptimizationJobStatus.STARTING,
            OptimizationJobStatus.INPROGRESS,
            OptimizationJobStatus.STOPPING,
            OptimizationJobStatus.STOPPED,
            OptimizationJobStatus.FAILED,
        }
    ),
    OptimizationJobStatus.INPROGRESS: frozenset(
        {
            OptimizationJobStatus.INPROGRESS,
            OptimizationJobStatus.STOPPING,
            OptimizationJobStatus.COMPLETED,
            OptimizationJobStatus.FAILED,
        }
    ),
    OptimizationJobStatus.STOPPING: frozenset(
        {
            OptimizationJobStatus.STOPPING,
            OptimizationJobStatus.STOPPED,
            OptimizationJobStatus.COMPLETED,
            OptimizationJobStatus.FAILED,
        }
    ),
    OptimizationJobStatus.COMPLETED: frozenset(),
    OptimizationJobStatus.FAILED: frozenset(),
    OptimizationJobStatus.STOPPED: frozenset(),
}
# The statuses a job may move to each status from: what its row must still hold when the
# change is written.
_ALLOWED_PREDECESSORS: dict[OptimizationJobStatus, frozenset[OptimizationJobStatus]] = {
    status: frozenset(before for before, after in _ALLOWED_TRANSITIONS.items() if status in after)
    for status in OptimizationJobStatus
}


class InvalidJobTransitionError(ValueError):
    """A status change the job's life cycle does not allow (e.g. out of a terminal status)."""


class JobStatusChangedError(InvalidJobTransitionError):
    """The row's status changed since the job was read, and the change no longer applies."""


@dataclass(frozen=True)
class JobListFilter:
    name_contains: str | None = None
    optimization_contains: str | None = None
    status: OptimizationJobStatus | None = None
    created: TimeRange = ANY_TIME
    last_modified: TimeRange = ANY_TIME


def create_optimization_job(
    session: Session,
    *,
    account_id: int,
    name: str,
    region: str,
    arn: str,
    role_arn: str,
    model_source: dict[str, Any],
    deployment_instance_type: str,
    optimization_configs: list[dict[str, Any]],
    output_config: dict[str, Any],
    stopping_condition: dict[str, Any],
    optimization_types: list[str],
    max_instance_count: int | None = None,
    optimization_environment: dict[str, str] | None = None,
    vpc_config: dict[str, Any] | None = None,
    training_plan_arns: list[str] | None = None,
    source_model_container: dict[str, Any] | None = None,
) -> OptimizationJob:
    """Insert a job in STARTING with its first event; NameAlreadyExistsError on a duplicate name."""
    if get_optimization_job_by_name(session, account_id=account_id, region=region, name=name) is not None:
        raise NameAlreadyExistsError(name)
    now = utc_now()
    job = OptimizationJob(
        account_id=account_id,
        name=name,
        name_key=name.lower(),
        region=region,
        arn=arn,
        role_arn=role_arn,
        model_source=model_source,
        deployment_instance_type=deployment_instance_type,
        max_instance_count=max_instance_count,
        optimization_environment=optimization_environment,
        optimization_configs=optimization_configs,
        output_config=output_config,
        stopping_condition=stopping_condition,
        vpc_config=vpc_config,
        training_plan_arns=training_plan_arns,
        optimization_types=",".join(optimization_types),
        source_model_container=source_model_container,
        status=OptimizationJobStatus.STARTING,
        last_message="Job created",
        created_at=now,
        last_modified_at=now,
    )
    try:
        with session.begin_nested():
            session.add(job)
            session.flush()
            session.add(
                JobEvent(job_id=job.id, occurred_at=now, status=job.status, stage=None, message="Job created")
            )
    except IntegrityError as error:  # a concurrent create with the same name won the race
        raise NameAlreadyExistsError(name) from error
    return job


def get_optimization_job_by_id(
    session: Session, *, job_id: int, for_update: bool = False
) -> OptimizationJob | None:
    """The job with this row id; ``for_update`` locks the row until commit (Postgres)."""
    statement = select(OptimizationJob).where(OptimizationJob.id == job_id)
    if for_update:
        statement = statement.with_for_update()
    return session.scalar(statement)


def get_optimization_job_by_name(
    session: Session, *, account_id: int, region: str, name: str, for_update: bool = False
) -> OptimizationJob | None:
    statement = select(OptimizationJob).where(
        OptimizationJob.account_id == account_id,
        OptimizationJob.region == region,
        OptimizationJob.name_key == name.lower(),
    )
    if for_update:
        statement = statement.with_for_update()
    return session.scalar(statement)


# What an OptimizationJobSummary shows; listing loads only these (the JSON documents of a
# page of jobs would otherwise dominate the cost of ListOptimizationJobs).
SUMMARY_COLUMNS = (
    OptimizationJob.id,
    OptimizationJob.account_id,
    OptimizationJob.name,
    OptimizationJob.name_key,
    OptimizationJob.arn,
    OptimizationJob.status,
    OptimizationJob.created_at,
    OptimizationJob.last_modified_at,
    OptimizationJob.started_at,
    OptimizationJob.ended_at,
    OptimizationJob.deployment_instance_type,
    OptimizationJob.max_instance_count,
    OptimizationJob.optimization_types,
)


def list_optimization_jobs(
    session: Session,
    *,
    account_id: int,
    region: str,
    page: PageRequest,
    filters: JobListFilter | None = None,
    summaries_only: bool = False,
) -> Page[OptimizationJob]:
    """One page of the account's jobs in the region, filtered and sorted as ListOptimizationJobs asks.

    ``summaries_only`` loads just SUMMARY_COLUMNS; touching any other attribute then raises.
    """
    filters = filters or JobListFilter()
    statement = select(OptimizationJob).where(
        OptimizationJob.account_id == account_id, OptimizationJob.region == region
    )
    if summaries_only:
        statement = statement.options(load_only(*SUMMARY_COLUMNS, raiseload=True))
    if filters.optimization_contains:
        statement = statement.where(
            contains(func.lower(OptimizationJob.optimization_types), filters.optimization_contains)
        )
    if filters.status is not None:
        statement = statement.where(OptimizationJob.status == filters.status)
    statement = filters.last_modified.apply(statement, OptimizationJob.last_modified_at)
    return list_named_rows(
        session,
        statement,
        table=_TABLE,
        page=page,
        name_contains=filters.name_contains,
        created=filters.created,
    )


def count_active_optimization_jobs(session: Session, *, account_id: int, region: str) -> int:
    """Active jobs of the account in the region: AWS's service quotas are per region."""
    return (
        session.scalar(
            select(func.count())
            .select_from(OptimizationJob)
            .where(
                OptimizationJob.account_id == account_id,
                OptimizationJob.region == region,
                OptimizationJob.status.in_(ACTIVE_STATUSES),
            )
        )
        or 0
    )


def transition_optimization_job(
    session: Session,
    *,
    job: OptimizationJob,
    status: OptimizationJobStatus,
    message: str,
    failure_reason: str | None = None,
    from_statuses: Collection[OptimizationJobStatus] | None = None,
) -> None:
    """Move a job to ``status`` and record the change as a JobEvent.

    Sets LastModifiedTime; OptimizationStartTime on the first INPROGRESS; OptimizationEndTime
    on a terminal status. Raises InvalidJobTransitionError for moves the life cycle forbids.

    The change is one conditional UPDATE (``WHERE status IN ...``): the row must still be in
    one of ``from_statuses`` (default: any status the life cycle allows the move from), else
    JobStatusChangedError and nothing is written. That holds on SQLite too, where
    SELECT ... FOR UPDATE locks nothing: of parallel changes exactly one wins, and a job that
    ended after it was read is never reopened.
    """
    if status not in _ALLOWED_TRANSITIONS[job.status]:
        raise InvalidJobTransitionError(
            f"optimization job {job.name!r} cannot go from {job.status} to {status}"
        )
    expected = _ALLOWED_PREDECESSORS[status]
    if from_statuses is not None:
        expected = expected & frozenset(from_statuses)
    now = utc_now()
    values: dict[str, Any] = {"status": status, "last_modified_at": now, "last_message": message}
    if status is OptimizationJobStatus.INPROGRESS and job.started_at is None:
        values["started_at"] = now
    if status.is_terminal:
        values["ended_at"] = now
        values["estimated_completion_at"] = None
    if failure_reason is not None:
        # FailureReason is limited to 1024 characters in the API.
        values["failure_reason"] = failure_reason[:1024]
    session.flush()  # the job's pending changes (a task id, say) are written first
    result = cast(
        CursorResult[Any],
        session.execute(
            update(OptimizationJob)
            .where(OptimizationJob.id == job.id, OptimizationJob.status.in_(expected))
            .values(values)
            .execution_options(synchronize_session=False)
        ),
    )
    if result.rowcount != 1:
        raise JobStatusChangedError(
            f"optimization job {job.name!r} is no longer in status {' or '.join(sorted(expected))}; "
            f"it cannot go to {status}"
        )
    for key, value in values.items():
        set_committed_value(job, key, value)  # as written: the row need not be read back
    session.add(JobEvent(job_id=job.id, occurred_at=now, status=status, stage=job.stage, message=message))
    session.flush()


def record_job_progress(
    session: Session,
    *,
    job: OptimizationJob,
    stage: str,
    percent: float | None,
    eta_seconds: float | None,
    message: str,
    worker: dict[str, Any] | None = None,
) -> None:
    """Store the worker's latest progress; a change of stage is also recorded as a JobEvent
    (naming the ``worker`` process that entered the stage)."""
    if percent is not None and not 0.0 <= percent <= 100.0:
        raise ValueError(f"progress percent must be within 0..100, got {percent}")
    if eta_seconds is not None and eta_seconds < 0:
        raise ValueError(f"eta_seconds must not be negative, got {eta_seconds}")
    now = utc_now()
    if stage != job.stage:
        session.add(
            JobEvent(
                job_id=job.id, occurred_at=now, status=job.status, stage=stage, message=message, worker=worker
            )
        )
    job.stage = stage
    job.progress_percent = percent
    job.estimated_completion_at = None if eta_seconds is None else now + timedelta(seconds=eta_seconds)
    job.progress_updated_at = now
    job.last_message = message
    session.flush()


def set_job_task_id(session: Session, *, job: OptimizationJob, task_id: str) -> None:
    job.celery_task_id = task_id
    session.flush()


def set_job_output(
    session: Session,
    *,
    job: OptimizationJob,
    optimization_output: dict[str, Any],
    deployment_recommendation: dict[str, Any] | None = None,
) -> None:
    """Store DescribeOptimizationJob's OptimizationOutput (e.g. RecommendedInferenceImage) and
    the benchmark's deployment recommendation."""
    job.optimization_output = optimization_output
    job.deployment_recommendation = deployment_recommendation
    job.last_modified_at = utc_now()
    session.flush()


def delete_optimization_job(
    session: Session, *, job: OptimizationJob, only_in: Collection[OptimizationJobStatus] | None = None
) -> bool:
    """Delete the job; its events go with it (ON DELETE CASCADE).

    With ``only_in``, only while the row's status is one of those. One DELETE ... WHERE:
    returns whether it deleted the row, so of parallel deletes exactly one gets True.
    """
    statement = delete(OptimizationJob).where(OptimizationJob.id == job.id)
    if only_in is not None:
        statement = statement.where(OptimizationJob.status.in_(only_in))
    session.flush()
    result = cast(CursorResult[Any], session.execute(statement.execution_options(synchronize_session=False)))
    if result.rowcount != 1:
        return False
    if job in session:
        session.expunge(job)  # its row is gone: a later flush must not write it back
    return True


def list_job_events(session: Session, *, job_id: int) -> list[JobEvent]:
    return list(
        session.scalars(
            select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.occurred_at, JobEvent.id)
        )
    )
