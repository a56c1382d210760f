"""The producer side of the job queue: start and stop optimization jobs on the workers.

The api (and a worker re-queueing a job) sends tasks by name on an app that imports no task
module, so nothing here pulls in the pipeline, torch or the worker package.
"""

from __future__ import annotations

import logging
from fnmatch import fnmatchcase

from celery import Celery

from core.celery_config import celery_config
from core.task_names import DISTIL_SHARD, RUN_OPTIMIZATION_JOB
from db.queries.optimization_job import get_optimization_job_by_id
from db.session import session_scope
from db.settings import Settings, get_settings

logger = logging.getLogger(__name__)

_producers: dict[tuple[str, ...], Celery] = {}


def producer_app(settings: Settings | None = None) -> Celery:
    """An app that only sends, built once per broker configuration (tests change settings)."""
    settings = settings or get_settings()
    key = (settings.broker_url, settings.result_backend, settings.worker_queue, str(settings.state_dir))
    if key not in _producers:
        app = Celery("eaglenest", set_as_current=False)
        app.conf.update(celery_config(settings))
        _producers[key] = app
    return _producers[key]


def queue_for_job(settings: Settings, deployment_instance_type: str) -> str:
    """The Celery queue a job (and its distillation shards) runs on: the first pattern of
    ``instance_type_queues`` its DeploymentInstanceType matches, else ``worker_queue``."""
    for pattern, queue in settings.instance_type_queues.items():
        if fnmatchcase(deployment_instance_type, pattern):
            return queue
    return settings.worker_queue


def _queue_of_job(settings: Settings, job_id: int) -> str:
    """The job's queue, from its row (the api, the reaper and Stop all know only the id)."""
    if not settings.instance_type_queues:
        return settings.worker_queue  # one queue for every job: no need to read the row
    with session_scope() as session:
        job = get_optimization_job_by_id(session, job_id=job_id)
        return queue_for_job(settings, "" if job is None else job.deployment_instance_type)


def enqueue_optimization_job(job_id: int, task_id: str | None = None) -> str:
    """Queue the job's run by id and return the Celery task id (``task_id`` when given).

    Call only after the job row is committed: a worker may pick the task up at once.
    """
    settings = get_settings()
    result = producer_app(settings).send_task(
        RUN_OPTIMIZATION_JOB, args=[job_id], queue=_queue_of_job(settings, job_id), task_id=task_id
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
    producer_app().control.revoke(task_id)
    logger.info("revoked task %s of optimization job %s", task_id, job_id)


def enqueue_distillation_shard(job_id: int, index: int, *, queue: str) -> str:
    """Queue one shard of the job's distillation on the job's queue; returns the task id."""
    result = producer_app().send_task(DISTIL_SHARD, args=[job_id, index], queue=queue)
    logger.info("queued shard %s of optimization job %s as task %s on %s", index, job_id, result.id, queue)
    return str(result.id)


def revoke_tasks(task_ids: list[str]) -> None:
    """Drop queued copies of these tasks on every worker (running ones stop by themselves)."""
    if task_ids:
        producer_app().control.revoke(task_ids)
