"""Every database read and write the worker makes, each in its own short unit of work.

Short transactions keep status changes visible to the api at once and never hold a
SQLite write lock while a stage runs.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session, sessionmaker

from db.optimization_job_status import OptimizationJobStatus
from db.optimization_jobs import (
    get_optimization_job_by_id,
    record_job_progress,
    transition_optimization_job,
)
from db.session import session_scope
from worker.job_snapshot import JobSnapshot
from worker.outcome import Outcome, final_transition

logger = logging.getLogger(__name__)


class JobStore:
    def __init__(self, session_factory: sessionmaker[Session] | None = None) -> None:
        # None means the process-wide factory for EAGLENEST_DATABASE_URL.
        self._session_factory = session_factory

    def claim(self, job_id: int, *, worker_name: str) -> JobSnapshot | None:
        """Move a STARTING job to INPROGRESS and return it; None when there is nothing to run.

        Idempotent, so a redelivered message is harmless: a missing or finished job is left
        alone, a job stopped before it started is confirmed STOPPED, and an INPROGRESS job
        (its previous worker was lost) is resumed.
        """
        with session_scope(self._session_factory) as session:
            job = get_optimization_job_by_id(session, job_id=job_id, for_update=True)
            if job is None:
                logger.warning("optimization job %s no longer exists; nothing to run", job_id)
                return None
            if job.status.is_terminal:
                logger.info("optimization job %s is already %s; nothing to run", job_id, job.status)
                return None
            if job.status is OptimizationJobStatus.STOPPING:
                transition_optimization_job(
                    session,
                    job=job,
                    status=OptimizationJobStatus.STOPPED,
                    message="Job stopped by StopOptimizationJob before it started",
                )
                return None
            if job.status is OptimizationJobStatus.STARTING:
                transition_optimization_job(
                    session,
                    job=job,
                    status=OptimizationJobStatus.INPROGRESS,
                    message=f"Job picked up by worker {worker_name}",
                )
            else:
                # Its own stage name, so that the resume shows in the job's event history.
                record_job_progress(
                    session,
                    job=job,
                    stage="resume",
                    percent=job.progress_percent,
                    eta_seconds=None,
                    message=f"Job resumed by worker {worker_name} after its previous worker was lost",
                )
            session.flush()
            return JobSnapshot.from_row(job)

    def is_stop_requested(self, job_id: int) -> bool:
        """The cooperative stop flag: StopOptimizationJob set STOPPING (or the job is gone)."""
        with session_scope(self._session_factory) as session:
            job = get_optimization_job_by_id(session, job_id=job_id)
            return job is None or job.status in {
                OptimizationJobStatus.STOPPING,
                OptimizationJobStatus.STOPPED,
            }

    def record_progress(
        self, job_id: int, *, stage: str, percent: float | None, eta_seconds: float | None, message: str
    ) -> None:
        with session_scope(self._session_factory) as session:
            job = get_optimization_job_by_id(session, job_id=job_id, for_update=True)
            if job is None:
                return
            record_job_progress(
                session, job=job, stage=stage, percent=percent, eta_seconds=eta_seconds, message=message
            )

    def finish(self, job_id: int, outcome: Outcome) -> OptimizationJobStatus | None:
        """Record the run's outcome unless the job already ended; returns the job's final status."""
        with session_scope(self._session_factory) as session:
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
        with session_scope(self._session_factory) as session:
            job = get_optimization_job_by_id(session, job_id=job_id, for_update=True)
            if job is None or job.status is not OptimizationJobStatus.STOPPING:
                return False
            transition_optimization_job(
                session, job=job, status=OptimizationJobStatus.STOPPED, message=message
            )
            return True
