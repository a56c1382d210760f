"""Every database read and write the worker makes, each in its own short unit of work.

Short transactions keep status changes visible to the api at once and never hold a
SQLite write lock while a stage runs.

A running job's worker renews a heartbeat (``progress_updated_at``) every few seconds.
That is its lease: a job whose heartbeat is older than ``lease_seconds`` has lost its
worker, and the next delivery of the job, or the reaper, takes it over.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from core.job_errors import JobFailedError
from core.job_spec import InvalidJobSpecError, JobSpec
from db.models.job_event import JobEvent
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus
from db.queries.optimization_job import (
    get_optimization_job_by_id,
    list_job_events,
    record_job_progress,
    set_job_output,
    transition_optimization_job,
)
from db.queries.role import RoleCredentials, get_role_credentials
from db.queries.training_point import NewTrainingPoint, add_training_points
from db.session import session_scope
from db.settings import get_settings
from db.types import utc_now
from worker.outcome import Outcome, final_transition
from worker.worker_identity import current_worker

logger = logging.getLogger(__name__)

RESUME_STAGE = "resume"
REQUEUE_STAGE = "requeued"


@dataclass(frozen=True)
class Claim:
    """What a delivery of a job may do: run ``job``, wait and ask again, or nothing."""

    job: JobSpec | None
    # > 0: the job's previous worker may still be alive; claim again after this long.
    wait_seconds: float = 0.0
    heartbeat: datetime | None = None


@dataclass(frozen=True)
class LeaseState:
    stop_requested: bool
    superseded: bool  # another delivery took the job over: this run must end without a trace


def heartbeat_of(job: OptimizationJob) -> datetime | None:
    return job.progress_updated_at or job.started_at


class JobStore:
    def __init__(self, session_factory: sessionmaker[Session] | None = None) -> None:
        # None means the process-wide factory for EAGLENEST_DATABASE_URL.
        self._session_factory = session_factory

    @contextmanager
    def unit_of_work(self) -> Iterator[Session]:
        with session_scope(self._session_factory) as session:
            yield session

    def claim(
        self,
        job_id: int,
        *,
        worker_name: str,
        task_id: str | None = None,
        lease_seconds: float = 30.0,
        max_attempts: int = 3,
        previous_heartbeat: datetime | None = None,
    ) -> Claim:
        """Move a STARTING job to INPROGRESS and return it, or decide what this delivery does.

        Idempotent, so a redelivered message is harmless: a missing or finished job is left
        alone, a job stopped before it started is confirmed STOPPED, a delivery that the
        reaper replaced (another task id) is dropped, and an INPROGRESS job is resumed once
        its previous worker's lease has run out (``wait_seconds`` says how long that is; a
        heartbeat newer than ``previous_heartbeat`` means that worker is alive after all).
        """
        with self.unit_of_work() as session:
            job = get_optimization_job_by_id(session, job_id=job_id, for_update=True)
            if job is None:
                logger.warning("optimization job %s no longer exists; nothing to run", job_id)
                return Claim(None)
            if job.status.is_terminal:
                logger.info("optimization job %s is already %s; nothing to run", job_id, job.status)
                return Claim(None)
            if job.status is OptimizationJobStatus.STOPPING:
                transition_optimization_job(
                    session,
                    job=job,
                    status=OptimizationJobStatus.STOPPED,
                    message="Job stopped by StopOptimizationJob before it started",
                )
                return Claim(None)
            if job.status is OptimizationJobStatus.STARTING:
                if task_id is not None:
                    job.celery_task_id = task_id
                transition_optimization_job(
                    session,
                    job=job,
                    status=OptimizationJobStatus.INPROGRESS,
                    message=f"Job picked up by worker {worker_name}",
                )
                return self._claimed(session, job)
            return self._claim_running(
                session, job, worker_name, task_id, lease_seconds, max_attempts, previous_heartbeat
            )

    def _claim_running(  # noqa: PLR0917 - private step of claim()
        self,
        session: Session,
        job: OptimizationJob,
        worker_name: str,
        task_id: str | None,
        lease_seconds: float,
        max_attempts: int,
        previous_heartbeat: datetime | None,
    ) -> Claim:
        if task_id is not None and job.celery_task_id not in (None, task_id):
            logger.info(
                "task %s of job %s was replaced by task %s; dropping it", task_id, job.id, job.celery_task_id
            )
            return Claim(None)
        heartbeat = heartbeat_of(job)
        # After the reaper's hand-over nobody runs the job: no lease to wait out.
        if heartbeat is not None and job.stage != REQUEUE_STAGE:
            if previous_heartbeat is not None and heartbeat > previous_heartbeat:
                logger.info(
                    "job %s is still running elsewhere (heartbeat %s); dropping this delivery",
                    job.id,
                    heartbeat,
                )
                return Claim(None)
            age = (utc_now() - heartbeat).total_seconds()
            if age < lease_seconds:
                return Claim(None, wait_seconds=lease_seconds - age + 0.5, heartbeat=heartbeat)
        if not self._resume_or_fail(
            session,
            job,
            max_attempts,
            message=f"Job resumed by worker {worker_name} after its previous worker was lost",
        ):
            return Claim(None)
        if task_id is not None:
            job.celery_task_id = task_id
        session.flush()
        return self._claimed(session, job)

    def _claimed(self, session: Session, job: OptimizationJob) -> Claim:
        """The claimed job's spec; a row whose stored request does not parse fails at once."""
        try:
            return Claim(JobSpec.from_row(job))
        except InvalidJobSpecError as error:
            logger.error("optimization job %s cannot run: %s", job.id, error)
            transition_optimization_job(
                session,
                job=job,
                status=OptimizationJobStatus.FAILED,
                message=f"Job failed: {error}",
                failure_reason=str(error),
            )
            return Claim(None)

    def _resume_or_fail(
        self, session: Session, job: OptimizationJob, max_attempts: int, *, message: str
    ) -> bool:
        """Record a resume, or fail the job once it has used up its attempts."""
        resumes = sum(1 for event in list_job_events(session, job_id=job.id) if event.stage == RESUME_STAGE)
        if resumes + 1 >= max_attempts:
            reason = (
                f"The job's worker was lost {resumes + 1} times (it stopped sending heartbeats); "
                f"giving up after {max_attempts} attempts"
            )
            transition_optimization_job(
                session,
                job=job,
                status=OptimizationJobStatus.FAILED,
                message=f"Job failed: {reason}",
                failure_reason=reason,
            )
            return False
        # Its own stage name, so that the resume shows in the job's event history.
        record_job_progress(
            session,
            job=job,
            stage=RESUME_STAGE,
            percent=job.progress_percent,
            eta_seconds=None,
            message=message,
        )
        return True

    def renew_lease(self, job_id: int, *, task_id: str | None) -> LeaseState:
        """Heartbeat of a running job; also tells whether it must stop or was taken over."""
        with self.unit_of_work() as session:
            job = get_optimization_job_by_id(session, job_id=job_id, for_update=True)
            if job is None:
                return LeaseState(stop_requested=True, superseded=False)
            if task_id is not None and job.celery_task_id not in (None, task_id):
                return LeaseState(stop_requested=True, superseded=True)
            if not job.status.is_terminal:
                job.progress_updated_at = utc_now()
            return LeaseState(
                stop_requested=job.status is not OptimizationJobStatus.INPROGRESS, superseded=False
            )

    def running_job(self, job_id: int) -> JobSpec | None:
        """The job while it is INPROGRESS (its shards run only then); None when it is not."""
        with self.unit_of_work() as session:
            job = get_optimization_job_by_id(session, job_id=job_id)
            if job is None or job.status != OptimizationJobStatus.INPROGRESS:
                return None
            return JobSpec.from_row(job)

    def is_stop_requested(self, job_id: int) -> bool:
        """The cooperative stop flag: StopOptimizationJob set STOPPING (or the job is gone)."""
        with self.unit_of_work() as session:
            job = get_optimization_job_by_id(session, job_id=job_id)
            return job is None or job.status in {
                OptimizationJobStatus.STOPPING,
                OptimizationJobStatus.STOPPED,
            }

    def record_progress(
        self, job_id: int, *, stage: str, percent: float | None, eta_seconds: float | None, message: str
    ) -> None:
        with self.unit_of_work() as session:
            job = get_optimization_job_by_id(session, job_id=job_id, for_update=True)
            if job is None:
                return
            record_job_progress(
                session,
                job=job,
                stage=stage,
                percent=percent,
                eta_seconds=eta_seconds,
                message=message,
                worker=current_worker(get_settings().device).model_dump(),
            )

    def role_credentials(self, job: JobSpec) -> RoleCredentials:
        """The S3 key pair of the job's RoleArn, which every S3 request of the job is signed with.

        Looked up when the job first touches S3, not stored with the job: deleting the role
        takes the access away from jobs that have not reached S3 yet, as it does on AWS.
        """
        with self.unit_of_work() as session:
            credentials = get_role_credentials(
                session, account_id=job.account_id, aws_account_id=job.aws_account_id, arn=job.role_arn
            )
        if credentials is None:
            raise JobFailedError(
                f"The job's role {job.role_arn} is no longer registered to its account, so the job "
                "cannot access S3."
            )
        return credentials

    def record_event(
        self, job_id: int, *, stage: str, message: str, worker: dict[str, Any] | None = None
    ) -> None:
        """A job event that changes neither status nor stage (a validation warning, say);
        ``worker`` names the process it is about (a distillation shard's)."""
        with self.unit_of_work() as session:
            job = get_optimization_job_by_id(session, job_id=job_id)
            if job is not None:
                session.add(
                    JobEvent(
                        job_id=job.id,
                        occurred_at=utc_now(),
                        status=job.status,
                        stage=stage,
                        message=message,
                        worker=worker,
                    )
                )

    def record_training_points(self, job_id: int, points: Sequence[NewTrainingPoint]) -> None:
        """Append training steps to the job's curve (the dashboard's loss/acceptance plots)."""
        with self.unit_of_work() as session:
            add_training_points(session, job_id=job_id, points=points)

    def set_output(
        self, job_id: int, output: dict[str, Any], recommendation: dict[str, Any] | None = None
    ) -> None:
        """DescribeOptimizationJob's OptimizationOutput and the REST face's DeploymentRecommendation."""
        with self.unit_of_work() as session:
            job = get_optimization_job_by_id(session, job_id=job_id, for_update=True)
            if job is not None:
                set_job_output(
                    session, job=job, optimization_output=output, deployment_recommendation=recommendation
                )

    def finish(self, job_id: int, outcome: Outcome) -> OptimizationJobStatus | None:
        """Record the run's outcome unless the job already ended; returns the job's final status."""
        with self.unit_of_work() as session:
            job = get_optimization_job_by_id(session, job_id=job_id, for_update=True)
            if job is None:
                return None
            transition = final_transition(job.status, outcome)
            if transition is None:
                return job.status
            transition_optimization_job(
                session,
                job=job,
                status=transition.status,
                message=transition.message,
                failure_reason=transition.failure_reason,
            )
            return transition.status

    def confirm_stopped(self, job_id: int, *, message: str) -> bool:
        """STOPPING → STOPPED for a job whose task never ran (revoked in the queue)."""
        with self.unit_of_work() as session:
            job = get_optimization_job_by_id(session, job_id=job_id, for_update=True)
            if job is None or job.status is not OptimizationJobStatus.STOPPING:
                return False
            transition_optimization_job(
                session, job=job, status=OptimizationJobStatus.STOPPED, message=message
            )
            return True

    # -- the reaper's side ---------------------------------------------------------------
    def lost_job_ids(self, *, lease_seconds: float) -> list[int]:
        """INPROGRESS and STOPPING jobs whose heartbeat is older than the lease."""
        cutoff = utc_now() - timedelta(seconds=lease_seconds)
        heartbeat = func.coalesce(
            OptimizationJob.progress_updated_at, OptimizationJob.started_at, OptimizationJob.last_modified_at
        )
        statement = select(OptimizationJob.id).where(
            OptimizationJob.status.in_([OptimizationJobStatus.INPROGRESS, OptimizationJobStatus.STOPPING]),
            heartbeat < cutoff,
        )
        with self.unit_of_work() as session:
            return list(session.scalars(statement.order_by(OptimizationJob.id)))

    def starting_job_ids(self) -> list[int]:
        statement = select(OptimizationJob.id).where(OptimizationJob.status == OptimizationJobStatus.STARTING)
        with self.unit_of_work() as session:
            return list(session.scalars(statement.order_by(OptimizationJob.id)))

    def take_over_lost_job(
        self, job_id: int, *, new_task_id: str, lease_seconds: float, max_attempts: int
    ) -> str:
        """Decide a lost job's fate under its row lock: 'requeue' (the new task id is now the
        job's), 'stopped', 'failed', or 'alive' (its heartbeat moved since it was listed)."""
        with self.unit_of_work() as session:
            job = get_optimization_job_by_id(session, job_id=job_id, for_update=True)
            if job is None or job.status.is_terminal:
                return "alive"
            heartbeat = heartbeat_of(job) or job.last_modified_at
            if (utc_now() - heartbeat).total_seconds() < lease_seconds:
                return "alive"
            if job.status is OptimizationJobStatus.STOPPING:
                transition_optimization_job(
                    session,
                    job=job,
                    status=OptimizationJobStatus.STOPPED,
                    message="Job stopped by StopOptimizationJob; its worker was no longer running",
                )
                return "stopped"
            if job.status is not OptimizationJobStatus.INPROGRESS:
                return "alive"
            resumes = sum(
                1 for event in list_job_events(session, job_id=job.id) if event.stage == RESUME_STAGE
            )
            if resumes + 1 >= max_attempts:
                self._resume_or_fail(session, job, max_attempts, message="")
                return "failed"
            job.celery_task_id = new_task_id
            record_job_progress(
                session,
                job=job,
                stage=REQUEUE_STAGE,
                percent=job.progress_percent,
                eta_seconds=None,
                message=f"No heartbeat from the job's worker since {heartbeat.isoformat()}; "
                "queued again to resume from its last checkpoint",
            )
            return "requeue"
