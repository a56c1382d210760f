"""Runs one optimization job from claim to final status; the Celery task is a thin wrapper.

Kept free of Celery so tests (and a debugger) can call it directly with their own stages.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from functools import partial

from db.optimization_job_status import OptimizationJobStatus
from db.settings import Settings, get_settings
from db.types import utc_now
from worker.context import JobContext
from worker.errors import JobFailedError, JobInterruptedError, StopRequestedError
from worker.job_store import JobStore
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
    poll_interval_seconds: float = 1.0,
    interrupt_grace_seconds: float = 5.0,
) -> OptimizationJobStatus | None:
    """Run the job's pipeline and record how it ended; returns the job's final status.

    Returns None without doing anything when the job is missing or already finished, so a
    duplicate delivery is harmless. Unexpected exceptions are recorded as FAILED and re-raised
    so Celery logs them with their traceback.
    """
    store = store or JobStore()
    job = store.claim(job_id, worker_name=socket.gethostname())
    if job is None:
        return None
    monitor = JobMonitor(
        stop_requested=partial(store.is_stop_requested, job_id),
        runtime_limit=runtime_limit_for(job, now=utc_now()),
        poll_interval_seconds=poll_interval_seconds,
        interrupt_grace_seconds=interrupt_grace_seconds,
    )
    ctx = JobContext(
        job=job,
        settings=settings or get_settings(),
        monitor=monitor,
        record_progress=partial(store.record_progress, job_id),
    )
    try:
        with monitor:
            run_pipeline(ctx, default_stages() if stages is None else stages)
    except JobInterruptedError as interruption:
        return store.finish(job_id, _interrupted_outcome(interruption))
    except JobFailedError as failure:
        logger.info("optimization job %s failed in stage %s: %s", job_id, ctx.stage, failure)
        return store.finish(job_id, Outcome.failed(str(failure)))
    except Exception as error:
        # A stage may wrap the interruption in its own exception; the monitor still knows why.
        if monitor.interruption is not None:
            return store.finish(job_id, _interrupted_outcome(monitor.interruption))
        store.finish(
            job_id, Outcome.failed(f"Internal error in stage '{ctx.stage}': {type(error).__name__}: {error}")
        )
        raise
    return store.finish(job_id, Outcome.completed())


def _interrupted_outcome(interruption: JobInterruptedError) -> Outcome:
    if isinstance(interruption, StopRequestedError):
        return Outcome.stopped()
    return Outcome.failed(str(interruption))
