"""Celery configuration derived from Settings; the only place the worker reads broker config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.task_names import RUN_OPTIMIZATION_JOB
from db.settings import Settings

# Redis hands an unacknowledged message to another worker after this long. With acks_late a
# job's message stays unacknowledged while it trains, so this must exceed any real job's
# runtime or a second worker would start the same job. A lost worker's job is redelivered
# after this time (or at once when only its pool process died: task_reject_on_worker_lost).
REDIS_VISIBILITY_TIMEOUT_SECONDS = 24 * 3600


def filesystem_broker_folders(state_dir: Path) -> dict[str, str]:
    """Where the ``filesystem://`` broker keeps messages and its control (broadcast) tables.

    Producer and worker read and write the same queue folder; ``control_folder`` is what makes
    broadcasts such as revoke (StopOptimizationJob) reach the worker.
    """
    root = state_dir.resolve() / "broker"
    return {
        "data_folder_in": str(root / "queue"),
        "data_folder_out": str(root / "queue"),
        "control_folder": str(root / "control"),
        "processed_folder": str(root / "processed"),
    }


def broker_transport_options(settings: Settings) -> dict[str, Any]:
    if settings.broker_url.startswith("filesystem://"):
        folders = filesystem_broker_folders(settings.state_dir)
        for folder in folders.values():
            Path(folder).mkdir(parents=True, exist_ok=True)
        return {**folders, "store_processed": False}
    if settings.broker_url.startswith(("redis://", "rediss://")):
        return {"visibility_timeout": REDIS_VISIBILITY_TIMEOUT_SECONDS}
    return {}


def celery_config(settings: Settings) -> dict[str, Any]:
    return {
        "broker_url": settings.broker_url,
        "result_backend": settings.result_backend,
        "broker_transport_options": broker_transport_options(settings),
        "broker_connection_retry_on_startup": True,
        "task_default_queue": settings.worker_queue,
        "task_routes": {RUN_OPTIMIZATION_JOB: {"queue": settings.worker_queue}},
        "task_serializer": "json",
        "accept_content": ["json"],
        # Status lives in the database; Celery results would only duplicate it.
        "task_ignore_result": True,
        # A job is acknowledged only when it ended, so a crashed worker's job is redelivered;
        # the task is idempotent (it reloads the row and skips finished jobs), which makes that safe.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # One job per worker process at a time: a second job would wait for the GPU anyway,
        # and a prefetched message could not be picked up by an idle worker.
        "worker_prefetch_multiplier": 1,
        # A fresh process per job returns all of a finished job's (GPU) memory.
        "worker_max_tasks_per_child": 1,
        # If the broker connection drops, the unacknowledged job is redelivered; cancelling the
        # running copy keeps two workers from training the same job.
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "worker_send_task_events": False,
        # With REMAP_SIGTERM=SIGQUIT in the worker's environment (docker-compose and the embedded
        # stack set it), SIGTERM gives a running job this long to finish, then cancels it and
        # hands its unacknowledged message back to the broker: the next worker resumes the job
        # (still INPROGRESS) instead of it waiting for the visibility timeout.
        "worker_soft_shutdown_timeout": settings.worker_shutdown_grace_seconds,
    }
