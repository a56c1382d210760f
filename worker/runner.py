"""Runs one optimization job from claim to final status; the Celery task is a thin wrapper.

Kept free of Celery so tests (and a debugger) can call it directly with their own stages.
"""

from __future__ import annotations

import logging
import shutil
import socket
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from core.job_errors import JobFailedError, JobInterruptedError, StopRequestedError
from core.job_spec import JobSpec
from db.models.optimization_job_status import OptimizationJobStatus
from db.settings import Settings, get_settings
from db.types import utc_now
from worker.context import JobContext, job_work_dir
from worker.job_logs import JobLogStream
from worker.job_store import JobStore
from worker.lease import JobLease
from worker.monitor import JobMonitor
from worker.outcome import Outcome
from worker.pipeline import Stage, default_stages, run_pipeline
from worker.runtime_limit import runtime_limit_for

logger = logging.getLogger(__name__)


def run_optimization_job(
    job_id: int,
    *,
    stages: Sequence[Stage] | None = None,
    store: JobStore | None = None,
    settings: Settings | None = None,
    task_id: str | None = None,
    poll_interval_seconds: float = 1.0,
    interrupt_grace_seconds: float = 5.0,
) -> OptimizationJobStatus | None:
    """Run the job's pipeline and record how it ended; returns the job's final status.

    Returns None without doing anything when the job is missing, already finished, or
    running elsewhere, so a duplicate delivery is harmless. Unexpected exceptions are
    recorded as FAILED and re-raised so Celery logs them with their traceback.
    """
    store = store or JobStore()
    settings = settings or get_settings()
    job = _claim(store, job_id, settings, task_id)
    if job is None:
        return None
    lease = JobLease(store, job_id, task_id=task_id, lease_seconds=settings.job_lease_seconds)
    monitor = JobMonitor(
        stop_requested=lease.poll,
        runtime_limit=runtime_limit_for(job, now=utc_now()),
        poll_interval_seconds=poll_interval_seconds,
        interrupt_grace_seconds=interrupt_grace_seconds,
    )
    job_log = JobLogStream(store.unit_of_work, job, retention_in_days=settings.log_retention_days)
    ctx = JobContext(
        job=job,
        settings=settings,
        monitor=monitor,
        record_progress=job_log.recording(partial(store.record_progress, job_id)),
        store=store,
    )
    with job_log:
        try:
            outcome = _run(ctx, monitor, default_stages() if stages is None else stages)
        finally:
            # Everything a resumed run needs is on S3; the local scratch space can go.
            shutil.rmtree(job_work_dir(settings, job_id), ignore_errors=True)
        if lease.superseded:
            logger.warning(
                "optimization job %s was taken over by another delivery; leaving it to that one", job_id
            )
            return None
        final = store.finish(job_id, outcome)
        job_log.write_outcome(outcome if final is None else replace(outcome, status=final))
    return final


def _claim(store: JobStore, job_id: int, settings: Settings, task_id: str | None) -> JobSpec | None:
    """The job to run, waiting out the lease of a previous worker that may still be alive."""
    claim_job = partial(
        store.claim,
        job_id,
        worker_name=socket.gethostname(),
        task_id=task_id,
        lease_seconds=settings.job_lease_seconds,
        max_attempts=settings.max_job_attempts,
    )
    claim = claim_job()
    first_seen = claim.heartbeat
    while claim.job is None and claim.wait_seconds > 0:
        logger.info(
            "job %s: its previous worker's lease runs %.0f s more; waiting", job_id, claim.wait_seconds
        )
        time.sleep(claim.wait_seconds)
        claim = claim_job(previous_heartbeat=first_seen)
    return claim.job


def _run(ctx: JobContext, monitor: JobMonitor, stages: Sequence[Stage]) -> Outcome:
    try:
        with monitor:
            run_pipeline(ctx, stages)
    except JobInterruptedError as interruption:
        return _interrupted_outcome(interruption)
    except JobFailedError as failure:
        logger.info("optimization job %s failed in stage %s: %s", ctx.job.id, ctx.stage, failure)
        return Outcome.failed(str(failure))
    except Exception as error:
        # A stage may wrap the interruption in its own exception; the monitor still knows why.
        if monitor.interruption is not None:
            return _interrupted_outcome(monitor.interruption)
        ctx.store.finish(
            ctx.job.id,
            Outcome.failed(f"Internal error in stage '{ctx.stage}': {type(error).__name__}: {error}"),
        )
        raise
    return Outcome.completed()


def _interrupted_outcome(interruption: JobInterruptedError) -> Outcome:
    if isinstance(interruption, StopRequestedError):
        return Outcome.stopped()
    return Outcome.failed(str(interruption))
