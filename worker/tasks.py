"""Celery tasks: thin wrappers that hand a job id to the runner."""

from __future__ import annotations

from celery import shared_task
from sqlalchemy.exc import OperationalError

from worker.runner import run_optimization_job
from worker.task_names import RUN_OPTIMIZATION_JOB


@shared_task(
    name=RUN_OPTIMIZATION_JOB,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    # The database being unreachable is worth waiting out: the job is idempotent, and a
    # retry resumes it (or finds it finished) once the database is back.
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=5,
)
def run_optimization_job_task(job_id: int) -> str | None:
    status = run_optimization_job(job_id)
    return None if status is None else status.value
