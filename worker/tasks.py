"""Celery tasks: thin wrappers that hand a job id to the runner."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from sqlalchemy.exc import OperationalError

from core.task_names import DISTIL_SHARD, RUN_OPTIMIZATION_JOB
from worker.fanout.shard import run_distillation_shard
from worker.runner import run_optimization_job

# Both tasks are idempotent: a redelivery after a lost worker, or a retry while the database
# is unreachable, resumes the work (or finds it done) once the database is back.
_IDEMPOTENT_TASK: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "max_retries": 5,
    "bind": True,
}


@shared_task(name=RUN_OPTIMIZATION_JOB, **_IDEMPOTENT_TASK)
def run_optimization_job_task(self: Any, job_id: int) -> str | None:
    # The task id identifies this delivery: the reaper re-queues a lost job under a new id,
    # and the claim then drops any copy of the old message that turns up later.
    status = run_optimization_job(job_id, task_id=self.request.id)
    return None if status is None else status.value


@shared_task(name=DISTIL_SHARD, **_IDEMPOTENT_TASK)
def distil_shard_task(self: Any, job_id: int, index: int) -> str:
    # Idempotent like the job's task: a shard already in, or held by a live worker, is left alone.
    return run_distillation_shard(job_id, index, task_id=self.request.id)
