"""Finds jobs whose worker was lost and gets them going again (or ends them).

Every worker process runs one reaper thread. A job is lost when its heartbeat is older
than ``job_lease_seconds``: its worker was killed (kill -9, OOM, a lost machine) and its
message is either gone (the ``filesystem://`` broker deletes a message when it is
delivered) or held by Redis until a 24-hour visibility timeout. The reaper then:

- re-queues an INPROGRESS job under a new task id (the old message, should it come back,
  is dropped at claim time) so it resumes from its last checkpoint on S3, or fails it
  once it has been resumed ``max_job_attempts - 1`` times;
- confirms STOPPED for a STOPPING job nobody is running any more.

At worker start-up it also re-queues every STARTING job: their messages may have been
lost with a previous worker, and a duplicate delivery is harmless (the claim is idempotent).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from db.settings import Settings
from worker.job_store import JobStore

logger = logging.getLogger(__name__)

Enqueue = Callable[[int, str], object]  # (job id, task id)


@dataclass(frozen=True)
class ReapedJob:
    job_id: int
    action: str  # requeue | stopped | failed


def reap_lost_jobs(store: JobStore, settings: Settings, enqueue: Enqueue) -> list[ReapedJob]:
    reaped = []
    for job_id in store.lost_job_ids(lease_seconds=settings.job_lease_seconds):
        task_id = str(uuid.uuid4())
        action = store.take_over_lost_job(
            job_id,
            new_task_id=task_id,
            lease_seconds=settings.job_lease_seconds,
            max_attempts=settings.max_job_attempts,
        )
        if action == "alive":
            continue
        if action == "requeue":
            enqueue(job_id, task_id)
        logger.warning("optimization job %s lost its worker: %s", job_id, action)
        reaped.append(ReapedJob(job_id, action))
    return reaped


def requeue_starting_jobs(store: JobStore, enqueue: Enqueue) -> list[int]:
    job_ids = store.starting_job_ids()
    for job_id in job_ids:
        enqueue(job_id, str(uuid.uuid4()))
    if job_ids:
        logger.info("re-queued %d STARTING jobs at worker start-up: %s", len(job_ids), job_ids)
    return job_ids


class ReaperThread(threading.Thread):
    """Runs the reaper at start-up and then every ``job_reaper_interval_seconds``."""

    def __init__(self, store: JobStore, settings: Settings, enqueue: Enqueue) -> None:
        super().__init__(name="job-reaper", daemon=True)
        self.store = store
        self.settings = settings
        self.enqueue = enqueue
        self._stopped = threading.Event()

    def run(self) -> None:
        self._guarded(lambda: requeue_starting_jobs(self.store, self.enqueue))
        while True:
            self._guarded(lambda: reap_lost_jobs(self.store, self.settings, self.enqueue))
            if self._stopped.wait(self.settings.job_reaper_interval_seconds):
                return

    def stop(self) -> None:
        self._stopped.set()

    @staticmethod
    def _guarded(action: Callable[[], object]) -> None:
        try:
            action()
        except Exception:
            # A database or broker hiccup must not end the reaper; the next round retries.
            logger.exception("job reaper round failed")
