"""A child process of the stack: started in its own process group, stopped with its whole group.

Each child gets its own session so that stopping it also reaches what it forked (Celery's
pool processes), and, on Linux, a parent-death signal so that a SIGKILLed ``eaglenest up``
leaves no orphans behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class RestartPolicy:
    """How a child that exits on its own is started again.

    Each restart waits twice as long as the one before (from ``first_delay_seconds`` up to
    ``max_delay_seconds``), and a child that needs more than ``max_restarts`` restarts within
    ``window_seconds`` is crashing for good: the stack stops rather than loop.
    """

    max_restarts: int = 5
    window_seconds: float = 600.0
    first_delay_seconds: float = 1.0
    max_delay_seconds: float = 30.0

    def delay_seconds(self, recent_restarts: int) -> float:
        return min(self.first_delay_seconds * 2.0**recent_restarts, self.max_delay_seconds)


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    # How long SIGTERM may take before the whole group is killed.
    stop_timeout_seconds: float = 10.0
    # None: the stack cannot go on without this child, and stops when it exits.
    restart: RestartPolicy | None = None


def _die_with_parent() -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def set_parent_death_signal() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return set_parent_death_signal


class ManagedProcess:
    def __init__(self, spec: ProcessSpec) -> None:
        self.spec = spec
        self._popen: subprocess.Popen[bytes] | None = None
        self._stop_requested_at: float | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int:
        if self._popen is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._popen.pid

    def start(self) -> None:
        """Start the process; again after it exited, for a restart (its log is appended to)."""
        self._stop_requested_at = None
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.spec.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                self.spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.spec.env},
                cwd=self.spec.cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent(),  # noqa: PLW1509 - runs prctl only; the stack starts children from one thread
            )
        logger.info("started %s (pid %s): %s", self.name, self._popen.pid, " ".join(self.spec.argv))

    def exit_code(self) -> int | None:
        """None while running (or never started), else the exit status."""
        return None if self._popen is None else self._popen.poll()

    def is_running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def stop(self) -> None:
        """SIGTERM the process, wait, then SIGKILL whatever is left of its group."""
        self.request_stop()
        self.wait_stopped()

    def request_stop(self) -> None:
        """Send SIGTERM to the process (not its group: it stops its own children in order)."""
        if self._popen is not None and self._popen.poll() is None:
            self._stop_requested_at = time.monotonic()
            with contextlib.suppress(ProcessLookupError):
                self._popen.send_signal(signal.SIGTERM)

    def wait_stopped(self) -> None:
        """Wait up to the stop timeout from ``request_stop``, then kill the whole group."""
        if self._popen is None:
            return
        pgid = self._popen.pid  # start_new_session made it the group leader
        started = self._stop_requested_at or time.monotonic()
        remaining = max(0.0, started + self.spec.stop_timeout_seconds - time.monotonic())
        try:
            self._popen.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            logger.warning(
                "%s ignored SIGTERM for %.0f s; killing it", self.name, self.spec.stop_timeout_seconds
            )
        self._kill_group(pgid)
        self._popen.wait()
        logger.info("%s stopped after %.1f s", self.name, time.monotonic() - started)

    def kill_leftovers(self) -> None:
        """After the process exited on its own: kill what it forked and left running at once.

        A worker killed with -9 leaves its pool process in the middle of a job; a new worker
        must not start while that one still writes the job's files and heartbeats.
        """
        if self._popen is not None and self._popen.poll() is not None and _group_alive(self._popen.pid):
            logger.warning("killing leftover processes of %s (group %s)", self.name, self._popen.pid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._popen.pid, signal.SIGKILL)

    def append_to_log(self, line: str) -> None:
        """Add a line of the supervisor's to the child's log (e.g. why it was restarted)."""
        with self.spec.log_path.open("a") as log:
            log.write(f"--- {line}\n")

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.spec.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _kill_group(self, pgid: int) -> None:
        """Kill members of the group that outlived the leader (e.g. pool processes)."""
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.1)  # members usually exit right after their leader
        if _group_alive(pgid):
            logger.warning("killing leftover processes of %s (group %s)", self.name, pgid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs; zombies (dead, not yet reaped) do not count."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat_file in proc.glob("[0-9]*/stat"):
        try:
            stat = stat_file.read_text()
        except OSError:
            continue  # the process ended while we looked
        # Fields after the parenthesised command name: state, ppid, pgrp, ...
        state, _ppid, group = stat.rsplit(")", 1)[1].split()[:3]
        if int(group) == pgid and state != "Z":
            return True
    return False
