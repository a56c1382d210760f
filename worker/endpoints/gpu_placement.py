"""Which of the worker's GPUs each serving process runs on: the one whose processes hold the
fewest weights.

An endpoint worker runs every endpoint's supervisor as a thread of one process, and a serving
process told ``cuda`` takes torch's current device, GPU 0: a four-GPU worker would pile every
instance of every endpoint on one GPU. So this process keeps, per GPU, the live serving
processes and the bytes of weights they load; a process claims the GPU with the fewest bytes
(then the fewest processes) before it starts (its child then sees only that GPU through
``CUDA_VISIBLE_DEVICES``) and gives it back once it has exited. Counting processes alone put a
small model beside a large one as readily as beside another small one; the weights are what
fills a GPU's memory, so they are what a claim weighs (a KV pool grows with the model too).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Mapping, Sequence


class GpuClaim:
    """One serving process's hold on one GPU; ``release`` may be called any number of times."""

    def __init__(self, placement: GpuPlacement, gpu: str, weight_bytes: int) -> None:
        self.placement = placement
        self.gpu = gpu
        self.weight_bytes = weight_bytes
        self.released = False

    def release(self) -> None:
        self.placement.release(self)


class GpuPlacement:
    def __init__(self, gpus: Sequence[str]) -> None:
        # Kept as the worker names them (ids or "GPU-<uuid>"): the child's CUDA_VISIBLE_DEVICES
        # must name the same device the worker's own list does.
        self.gpus = tuple(gpus)
        self._running = dict.fromkeys(self.gpus, 0)
        self._bytes = dict.fromkeys(self.gpus, 0)
        self._lock = threading.Lock()

    def claim(self, weight_bytes: int = 0) -> GpuClaim | None:
        """The GPU whose running processes load the fewest bytes of weights, then the one with the
        fewest processes (the first listed on a tie), for a process that loads ``weight_bytes``;
        None without GPUs."""
        if weight_bytes < 0:
            raise ValueError(f"weight_bytes must not be negative, got {weight_bytes}")
        with self._lock:
            if not self.gpus:
                return None
            gpu = min(self.gpus, key=lambda candidate: (self._bytes[candidate], self._running[candidate]))
            self._running[gpu] += 1
            self._bytes[gpu] += weight_bytes
            return GpuClaim(self, gpu, weight_bytes)

    def release(self, claim: GpuClaim) -> None:
        with self._lock:
            # A process's exit can be seen by more than one path (a poll, a stop): count it once.
            if claim.released:
                return
            claim.released = True
            self._running[claim.gpu] -= 1
            self._bytes[claim.gpu] -= claim.weight_bytes

    def running(self) -> dict[str, int]:
        with self._lock:
            return dict(self._running)

    def weight_bytes(self) -> dict[str, int]:
        """The bytes of weights the running processes on each GPU load."""
        with self._lock:
            return dict(self._bytes)


def worker_gpus(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The GPUs this process may use: its CUDA_VISIBLE_DEVICES entries when set (empty: none),
    else every GPU torch counts."""
    visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return tuple(entry.strip() for entry in visible.split(",") if entry.strip())
    import torch  # noqa: PLC0415 - only a GPU worker asks; a CPU worker never loads CUDA

    return tuple(str(index) for index in range(torch.cuda.device_count()))


_BUILD_LOCK = threading.Lock()


@functools.cache
def _worker_placement() -> GpuPlacement:
    return GpuPlacement(worker_gpus())


def worker_placement() -> GpuPlacement:
    """This process's one placement, built when its first GPU serving process starts."""
    # Two supervisors can start their first instance at once: both must get the same counts.
    with _BUILD_LOCK:
        return _worker_placement()


def claim_gpu(device: str, weight_bytes: int = 0) -> GpuClaim | None:
    """A GPU for a serving process on ``device`` that loads ``weight_bytes``; None on the CPU
    (``cpu``, or ``auto`` without a GPU)."""
    if device == "cpu":
        return None
    return worker_placement().claim(weight_bytes)
