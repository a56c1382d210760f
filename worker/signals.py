"""Worker-side Celery signal handlers."""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import task_revoked, worker_process_init

from db.session import get_engine
from worker.job_store import JobStore
from worker.task_names import RUN_OPTIMIZATION_JOB

logger = logging.getLogger(__name__)


@task_revoked.connect
def confirm_stop_of_revoked_job(sender: Any = None, request: Any = None, **_: Any) -> None:
    """A job revoked by StopOptimizationJob before it ran never reaches the runner: confirm it here."""
    if getattr(sender, "name", None) != RUN_OPTIMIZATION_JOB or request is None or not request.args:
        return
    job_id = int(request.args[0])
    if JobStore().confirm_stopped(job_id, message="Job stopped by StopOptimizationJob before it started"):
        logger.info("optimization job %s stopped before it started", job_id)


@worker_process_init.connect
def drop_inherited_connections(**_: Any) -> None:
    """A forked pool process must not reuse the parent's database connections."""
    if get_engine.cache_info().currsize:
        get_engine().dispose(close=False)
