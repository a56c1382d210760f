"""What the api calls, after committing, to start and stop optimization jobs on the workers."""

from __future__ import annotations

import logging

from core.task_names import RUN_OPTIMIZATION_JOB
from db.settings import get_settings
from worker.app import get_celery_app

logger = logging.getLogger(__name__)


def enqueue_optimization_job(job_id: int, task_id: str | None = None) -> str:
    """Queue the job's run by id and return the Celery task id (``task_id`` when given).

    Call only after the job row is committed: a worker may pick the task up at once.
    """
    settings = get_settings()
    result = get_celery_app(settings).send_task(
        RUN_OPTIMIZATION_JOB, args=[job_id], queue=settings.worker_queue, task_id=task_id
    )
    logger.info("queued optimization job %s as task %s", job_id, result.id)
    return str(result.id)


def request_stop(job_id: int, task_id: str | None) -> None:
    """Ask the workers to end a job the api has just set to STOPPING.

    A running job notices STOPPING within about a second (its monitor polls the row) and ends
    STOPPED. A job still in the queue is revoked, and the worker confirms STOPPED when it
    discards the message; if no worker saw the revoke (none was running), the task still
    sees STOPPING when it starts. With no task id the job was never queued, so it is queued
    now for a worker to confirm STOPPED rather than stay STOPPING for ever.
    """
    if task_id is None:
        enqueue_optimization_job(job_id)
        return
    get_celery_app().control.revoke(task_id)
    logger.info("revoked task %s of optimization job %s", task_id, job_id)
