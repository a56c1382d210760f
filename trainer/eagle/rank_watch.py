"""Rank 0's watch over its helper ranks while it is in a data-parallel group.

A helper never ends before rank 0 leaves the group, so one that has exited is lost, whatever
its exit status. gloo notices by itself: rank 0's next collective fails at once ("Connection
closed by peer"). NCCL does not: rank 0 would block in the collective until the 10-minute
collective timeout, then NCCL's watchdog would end the process. So on NCCL the watch aborts
the group a few seconds after the exit, which makes the blocked collective (or the next one)
fail in rank 0's main thread, where ``process_group`` names the lost rank; if rank 0 is
still in the group a while after that, it ends the process itself, the end the watchdog
would have given ten minutes later (the worker's redelivery takes over from there).

A helper that hangs without exiting stops rank 0 in its next collective, on either backend, until
the same timeout. So the watch also reads how long rank 0 has been in its current collective
(``CollectiveClock``): past ``STALL_SECONDS``, once every helper has reached its first collective
(before that they are still loading the target, which may take minutes), the run is hung. The
watch names the ranks that never reached that collective (or says that every rank did and it
did not complete), kills the helpers, which fails rank 0's collective at once on gloo, and on
NCCL goes on as for a lost rank.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch.distributed.distributed_c10d as c10d

from trainer.eagle.collective_clock import CollectiveClock, read_count

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
# How long rank 0 may wait in one collective once training runs: a step's slowest shard takes
# seconds, and rank 0's own checkpoints and uploads happen between collectives, not in one.
STALL_SECONDS = 180.0


class RankWatch:
    """Watches ``helpers`` (rank r is ``helpers[r - 1]``) from a daemon thread between
    ``start`` and ``stop`` (or for a ``watching`` block): for a lost rank it acts only on the
    NCCL backend; a hung group (rank 0's ``clock``, the helpers' ``count_files``) on both."""

    def __init__(
        self,
        helpers: Sequence[subprocess.Popen[bytes]],
        backend: str,
        *,
        clock: CollectiveClock | None = None,
        count_files: Sequence[Path] = (),
        stall_seconds: float = STALL_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        abort_grace_seconds: float = ABORT_GRACE_SECONDS,
        exit_grace_seconds: float = EXIT_GRACE_SECONDS,
        abort: Callable[[], None] | None = None,
        end_process: Callable[[], None] | None = None,
    ) -> None:
        self._helpers = list(helpers)
        self._backend = backend
        self._clock = clock
        self._count_files = list(count_files)
        self._stall_seconds = stall_seconds
        # Why the watch ended a hung run, for rank 0's error; None unless it did.
        self.hung: str | None = None
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
        trouble = self._wait_for_trouble()
        if trouble is None:
            return
        if isinstance(trouble, str):
            self.hung = trouble
            logger.error("%s; ending the run instead of waiting for the collective timeout", trouble)
            kill_remaining(self._helpers)  # gloo: rank 0's collective fails now, its peers gone
            reason = "hung"
        else:
            rank, helper = trouble
            logger.error(
                "data-parallel rank %d (pid %d) exited with %s while rank 0 is in the group",
                rank,
                helper.pid,
                helper.returncode,
            )
            reason = f"lost rank {rank}"
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
            "rank 0 is still in the data-parallel group %.0f s after aborting it (%s); "
            "ending this process instead of waiting for the collective timeout",
            self._exit_grace_seconds,
            reason,
        )
        self._end_process()

    def _wait_for_trouble(self) -> tuple[int, subprocess.Popen[bytes]] | str | None:
        """The first helper found exited, with its rank, or what hangs the group; None once rank
        0 has left."""
        while not self._left.wait(self._poll_seconds):
            lost = first_exited(self._helpers)
            if lost is not None:
                return lost
            hung = self._hung_group()
            if hung is not None:
                return hung
        return None

    def _hung_group(self) -> str | None:
        """What hangs the group, once rank 0 has waited ``stall_seconds`` in one collective
        while every helper had reached its first; None while it has not."""
        if self._clock is None:
            return None
        waited = self._clock.seconds_inside()
        if waited is None or waited < self._stall_seconds:
            return None
        # 0 also for a file not written yet, or caught mid-write (read again at the next poll).
        counts = [read_count(path) or 0 for path in self._count_files]
        if 0 in counts:
            return None  # a helper still starting (loading the target) is the join's business
        current = self._clock.count
        behind = [rank for rank, count in enumerate(counts, start=1) if count < current]
        if behind:
            ranks = ", ".join(f"{rank} (pid {self._helpers[rank - 1].pid})" for rank in behind)
            return (
                f"data-parallel rank {ranks} did not reach collective {current} in {waited:.0f} s "
                "while rank 0 waited in it: hung"
            )
        return (
            f"collective {current} did not complete in {waited:.0f} s though every data-parallel rank "
            "reached it"
        )


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
