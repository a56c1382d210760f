"""Which worker process runs a piece of a job, and on what device (shown by the REST face and dashboard)."""

from __future__ import annotations

import os
import socket

from pydantic import BaseModel

from trainer.device import device_type


class WorkerIdentity(BaseModel):
    """Who ran a piece of a job: hostname, process and device."""

    hostname: str
    pid: int
    device: str


def current_worker(device_setting: str) -> WorkerIdentity:
    """This process, on the device its EAGLENEST_DEVICE runs jobs on (``cpu`` stays the CPU
    even where torch sees a GPU)."""
    device = device_type(device_setting)
    return WorkerIdentity(hostname=socket.gethostname(), pid=os.getpid(), device=device)
