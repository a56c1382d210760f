"""Rank 0's watch over its helper ranks while it is in a data-parallel group.

A helper never ends before rank 0 leaves the group, so one that has exited is lost, whatever
its exit status. gloo notices by itself: rank 0's next collective fails at once ("Connection
closed by peer"). NCCL does not: rank 0 would block in the collective until the 10-minute
collective timeout, then NCCL's watchdog would end the process. So on NCCL the watch aborts
the group a few seconds after the exit, which makes the blocked collective (or the next one)
fail in rank 0's main thread, where ``process_group`` names the lost rank; if rank 0 is
still in the group a while after that, it ends the process itself, the end the watchdog
would have given ten minutes later (the worker's redelivery takes over from there).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch.distributed.distributed_c10d as c10d

logger = logging.getLogger(__name__)

# How often the helpers' exit status is read: a lost rank is acted on within about this.
POLL_SECONDS = 1.0
# Between a helper's exit and the abort: a run that fails or finishes by itself does so
# undisturbed (rank 0 leaving stops the watch).
ABORT_GRACE_SECONDS = 5.0
# Between the abort and ending the process: long enough for rank 0 to finish writing a
# checkpoint and reach its next collective, which fails now that the group is gone.
EXIT_GRACE_SECONDS = 60.0
# What the process ends with when the abort did not get rank 0 out of the group.
STUCK_EXIT_STATUS = 1


class RankWatch:
    """Watches ``helpers`` (rank r is ``helpers[r - 1]``) from a daemon thread between
    ``start`` and ``stop`` (or for a ``watching`` block); acts only on the NCCL backend."""

    def __init__(
        self,
        helpers: Sequence[subprocess.Popen[bytes]],
        backend: str,
        *,
        poll_seconds: float = POLL_SECONDS,
        abort_grace_seconds: float = ABORT_GRACE_SECONDS,
        exit_grace_seconds: float = EXIT_GRACE_SECONDS,
        abort: Callable[[], None] | None = None,
        end_process: Callable[[], None] | None = None,
    ) -> None:
        self._helpers = list(helpers)
        self._backend = backend
        self._poll_seconds = poll_seconds
        self._abort_grace_seconds = abort_grace_seconds
        self._exit_grace_seconds = exit_grace_seconds
        self._abort = abort or abort_every_group
        self._end_process = end_process or (lambda: end_this_process(self._helpers))
        # Set when rank 0 has left the group (or given up on it): nothing may fire after.
        self._left = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="rank-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._left.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    @contextmanager
    def watching(self) -> Iterator[RankWatch]:
        """Watching for the block, stopped however it ends."""
        self.start()
        try:
            yield self
        finally:
            self.stop()

    def _watch(self) -> None:
        lost = self._wait_for_a_lost_rank()
        if lost is None:
            return
        rank, helper = lost
        logger.error(
            "data-parallel rank %d (pid %d) exited with %s while rank 0 is in the group",
            rank,
            helper.pid,
            helper.returncode,
        )
        if self._backend != "nccl":
            return  # gloo fails rank 0's next collective by itself
        if self._left.wait(self._abort_grace_seconds):
            return
        logger.error("aborting the NCCL group, which does not notice a lost rank by itself")
        try:
            self._abort()
        except Exception:  # experimental in torch; the fallback below still applies
            logger.exception("aborting the NCCL group failed")
        if self._left.wait(self._exit_grace_seconds):
            return
        logger.critical(
            "rank 0 is still in the data-parallel group %.0f s after aborting it for lost rank %d; "
            "ending this process instead of waiting for the collective timeout",
            self._exit_grace_seconds,
            rank,
        )
        self._end_process()

    def _wait_for_a_lost_rank(self) -> tuple[int, subprocess.Popen[bytes]] | None:
        """The first helper found exited, with its rank; None once rank 0 has left."""
        while not self._left.wait(self._poll_seconds):
            lost = first_exited(self._helpers)
            if lost is not None:
                return lost
        return None


def first_exited(helpers: Sequence[subprocess.Popen[bytes]]) -> tuple[int, subprocess.Popen[bytes]] | None:
    """The first of ``helpers`` (rank r is ``helpers[r - 1]``) that has exited, with its rank."""
    for rank, helper in enumerate(helpers, start=1):
        if helper.poll() is not None:
            return rank, helper
    return None


def kill_remaining(helpers: Sequence[subprocess.Popen[bytes]]) -> None:
    """Kill every helper still running and reap it."""
    for helper in helpers:
        if helper.poll() is None:
            helper.kill()
            helper.wait()


def abort_every_group() -> None:
    """torch's abort of every process group, looked up when it is needed: it is private and
    experimental, so a torch without it (the GPU image pins its own) fails this call, which the
    watch logs before its fallback, not the import of the trainer."""
    c10d._abort_process_group()


def end_this_process(helpers: Sequence[subprocess.Popen[bytes]]) -> None:
    """``os._exit``, since rank 0's main thread is stuck: no ``finally`` will run, so the
    helpers (in their own sessions, which outlive it) are killed here."""
    kill_remaining(helpers)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(STUCK_EXIT_STATUS)
