"""Start the ranks of a data-parallel run and join them in one torch.distributed group.

The caller of ``train`` (the worker, the CLI) is rank 0: it keeps the progress callback,
the stop flag and the result. It starts ranks 1..N-1 as child processes
(``python -m trainer.helper_rank``) once the data is prepared, so they read the
samples it wrote instead of preparing them again, and they never outlive it: a rank that
fails fails the run, and leaving the group kills whatever is left. While rank 0 is in the group
a ``RankWatch`` reads the helpers' exit status, since NCCL does not notice a lost rank, and how
far each rank has got (``CollectiveClock``), since neither backend notices a hung one.

The ranks meet through a ``FileStore`` in the run directory (no port to pick or open);
gloo carries the collectives on CPU, NCCL on CUDA (one device per rank).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import FileStore

from trainer.config import TrainConfig
from trainer.eagle.collective_clock import CollectiveClock, count_file_for, remove_count_files
from trainer.eagle.data_parallel import DataParallel
from trainer.eagle.rank_watch import RankWatch, first_exited, kill_remaining

logger = logging.getLogger(__name__)

STORE_FILE = ".process-group-store"
CONFIG_FILE = ".process-group-config.json"
# How long a collective may wait for the slowest rank. Rank 0 alone writes checkpoints
# (seconds) while the others wait; anything longer is a hung or lost rank.
COLLECTIVE_TIMEOUT = timedelta(minutes=10)
# How long the ranks may take to start (import torch and transformers) and join.
JOIN_TIMEOUT_SECONDS = 300.0


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def rank_device(device: torch.device, rank: int) -> torch.device:
    """Rank r of a CUDA run uses GPU r of its machine; CPU ranks share the CPU."""
    return torch.device("cuda", rank) if device.type == "cuda" else device


def check_gpu_per_rank(nproc: int, device: torch.device) -> None:
    """``ValueError`` unless a run of ``nproc`` ranks on ``device`` has a GPU for each (CUDA)."""
    if nproc > 1 and device.type == "cuda" and torch.cuda.device_count() < nproc:
        raise ValueError(
            f"nproc {nproc} on CUDA needs one GPU per process; {torch.cuda.device_count()} visible"
        )


@contextmanager
def data_parallel_group(config: TrainConfig, device: torch.device) -> Iterator[DataParallel]:
    """Rank 0's view of a run over ``config.nproc`` processes; one process needs no group."""
    if config.nproc == 1:
        yield DataParallel.single(device)
        return
    check_gpu_per_rank(config.nproc, device)
    store_path = config.out_dir / STORE_FILE
    config_path = config.out_dir / CONFIG_FILE
    store_path.unlink(missing_ok=True)
    remove_count_files(store_path, config.nproc)  # a crashed run's must not pass for this one's
    config_path.write_text(config.model_dump_json())
    helpers = [_start_helper(config_path, store_path, rank, config.nproc) for rank in range(1, config.nproc)]
    try:
        parallel = join(0, config.nproc, store_path, device, helpers=helpers)
        count_files = [count_file_for(store_path, rank) for rank in range(1, config.nproc)]
        watch = RankWatch(helpers, backend_for(device), clock=parallel.clock, count_files=count_files)
        # Stopped before leave(): a helper may exit as soon as it is past the last barrier.
        with watch.watching():
            try:
                yield parallel
            # ValueError: a collective after the watch aborted the group finds no group.
            except (RuntimeError, ValueError) as error:
                if watch.hung is not None:
                    raise RuntimeError(f"{watch.hung}: {error}") from error
                _name_a_lost_rank(helpers, error)
                raise
        leave()
        _wait_for(helpers)
    finally:
        kill_remaining(helpers)
        if dist.is_initialized():
            dist.destroy_process_group()
        store_path.unlink(missing_ok=True)
        config_path.unlink(missing_ok=True)
        remove_count_files(store_path, config.nproc)


def join(
    rank: int,
    world_size: int,
    store_path: Path,
    device: torch.device,
    *,
    helpers: list[subprocess.Popen[bytes]] | None = None,
) -> DataParallel:
    """Join the group as ``rank``; rank 0 watches its helpers so one that dies while starting
    fails the run at once instead of after the join timeout."""
    store = FileStore(str(store_path), world_size)
    store.set(f"ready-{rank}", "1")
    deadline = time.monotonic() + JOIN_TIMEOUT_SECONDS
    waiting = [f"ready-{other}" for other in range(world_size)]
    while True:
        try:
            store.wait(waiting, timedelta(seconds=1))
            break
        except RuntimeError:  # the FileStore's timeout: someone has not joined yet
            lost = first_exited(helpers or [])
            if lost is not None:
                _, helper = lost
                raise RuntimeError(
                    f"data-parallel rank (pid {helper.pid}) exited with {helper.returncode} "
                    "before joining; see its log above"
                ) from None
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"data-parallel ranks did not all join within {JOIN_TIMEOUT_SECONDS:.0f} s"
                ) from None
    this_device = rank_device(device, rank)
    if this_device.type == "cuda":
        torch.cuda.set_device(this_device)
    dist.init_process_group(
        backend_for(this_device), store=store, rank=rank, world_size=world_size, timeout=COLLECTIVE_TIMEOUT
    )
    clock = CollectiveClock(count_file_for(store_path, rank))
    return DataParallel(rank=rank, world_size=world_size, device=this_device, clock=clock)


def leave() -> None:
    """Every rank passes this point together, then the group is gone."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _start_helper(config_path: Path, store_path: Path, rank: int, world_size: int) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "trainer.helper_rank",
        str(config_path),
        str(store_path),
        str(rank),
        str(world_size),
    ]
    # Their own session: a Ctrl-C or a signal to the caller's process group reaches rank 0,
    # which ends the run and them; a helper never decides to stop on its own.
    return subprocess.Popen(command, start_new_session=True)


def _name_a_lost_rank(helpers: list[subprocess.Popen[bytes]], error: Exception) -> None:
    """A collective that failed because a rank died says so (gloo only says the peer closed)."""
    time.sleep(0.5)  # the dead rank's exit status may lag its closed sockets
    for rank, helper in enumerate(helpers, start=1):
        if helper.poll() is not None and helper.returncode != 0:
            raise RuntimeError(
                f"data-parallel rank {rank} (pid {helper.pid}) exited with {helper.returncode} during "
                f"training: {error}"
            ) from error


def _wait_for(helpers: list[subprocess.Popen[bytes]]) -> None:
    """The helpers left the group with rank 0; they only have to exit."""
    for helper in helpers:
        with suppress(subprocess.TimeoutExpired):
            helper.wait(timeout=60)
        if helper.returncode is None:
            raise RuntimeError(f"data-parallel rank (pid {helper.pid}) did not exit after the run")
        if helper.returncode != 0:
            raise RuntimeError(f"data-parallel rank (pid {helper.pid}) exited with {helper.returncode}")
