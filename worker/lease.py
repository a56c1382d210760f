"""A running job's lease: the heartbeat the reaper looks at, and the stop flag, in one poll.

The job monitor polls ``poll()`` about once a second from its own thread, so the heartbeat
keeps going while a stage blocks (a long download, a training step). The heartbeat is
written every ``lease_seconds / HEARTBEATS_PER_LEASE``; in between, only the stop flag is read.
"""

from __future__ import annotations

import time

from worker.job_store import JobStore

HEARTBEATS_PER_LEASE = 5


class JobLease:
    def __init__(self, store: JobStore, job_id: int, *, task_id: str | None, lease_seconds: float) -> None:
        self.store = store
        self.job_id = job_id
        self.task_id = task_id
        self.interval = lease_seconds / HEARTBEATS_PER_LEASE
        self._last_beat = time.monotonic()  # the claim itself was a heartbeat
        self.superseded = False

    def poll(self) -> bool:
        """True when the run must end: a stop request, or the job was taken over."""
        now = time.monotonic()
        if now - self._last_beat < self.interval:
            return self.store.is_stop_requested(self.job_id)
        self._last_beat = now
        state = self.store.renew_lease(self.job_id, task_id=self.task_id)
        self.superseded = self.superseded or state.superseded
        return state.stop_requested
