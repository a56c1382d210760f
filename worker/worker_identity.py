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


def running_device(device_setting: str) -> str:
    """The device a worker set to ``device_setting`` (its EAGLENEST_DEVICE) runs its jobs on:
    ``cpu`` stays on the CPU even where torch sees a GPU, ``auto`` takes the GPU when there is
    one, and ``cuda`` is the GPU (a job there fails, saying so, if the worker has none)."""
    if device_setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device_setting


def current_worker(device_setting: str) -> WorkerIdentity:
    device = running_device(device_setting)
    return WorkerIdentity(hostname=socket.gethostname(), pid=os.getpid(), device=device)
