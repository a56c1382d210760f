"""Worker-side Celery signal handlers."""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import task_revoked, worker_process_init, worker_ready, worker_shutdown

from core.job_queue import enqueue_optimization_job
from core.task_names import RUN_OPTIMIZATION_JOB
from db.session import create_db_engine, create_session_factory, get_engine
from db.settings import get_settings
from worker.job_store import JobStore
from worker.reaper import ReaperThread

logger = logging.getLogger(__name__)

_reapers: list[ReaperThread] = []


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


@worker_ready.connect
def start_reaper(**_: Any) -> None:
    """The main worker process looks for jobs whose worker was lost (see ``worker.reaper``)."""
    settings = get_settings()
    # Its own one-connection engine: pool processes are forked from this process while the
    # reaper may be using it, and must never share (or wait on) its connection.
    engine = create_db_engine(settings.database_url, pool_size=1, max_overflow=0)
    reaper = ReaperThread(
        JobStore(create_session_factory(engine)),
        settings,
        enqueue_optimization_job,
    )
    reaper.start()
    _reapers.append(reaper)
    logger.info(
        "job reaper started: lease %.0f s, every %.0f s",
        settings.job_lease_seconds,
        settings.job_reaper_interval_seconds,
    )


@worker_shutdown.connect
def stop_reaper(**_: Any) -> None:
    while _reapers:
        _reapers.pop().stop()
