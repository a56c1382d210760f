"""Which worker process runs a piece of a job, and on what device (shown by the REST face and dashboard)."""

from __future__ import annotations

import os
import socket

import torch
from pydantic import BaseModel


class WorkerIdentity(BaseModel):
    """Who ran a piece of a job: hostname, process and device."""

    hostname: str
    pid: int
    device: str


def current_device() -> str:
    """``cuda`` when this process sees a GPU, else ``cpu``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def current_worker() -> WorkerIdentity:
    return WorkerIdentity(hostname=socket.gethostname(), pid=os.getpid(), device=current_device())
