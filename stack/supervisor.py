"""Starts the stack's children in order, restarts those that crash, and stops them in reverse order."""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from types import TracebackType

from stack.processes import ManagedProcess, ProcessSpec

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChildExit:
    """A child that exited on its own, and what the supervisor does about it."""

    process: ManagedProcess
    exit_code: int
    # Seconds until it is started again; None when it is not: the stack must stop.
    restart_in_seconds: float | None
    restarts: int  # restarts of this child so far, this one included


@dataclass(frozen=True)
class SupervisorCheck:
    exits: list[ChildExit]
    restarted: list[ManagedProcess]


@dataclass
class _RestartState:
    recent: deque[float] = field(default_factory=deque)  # monotonic times of recent restarts
    due_at: float | None = None
    total: int = 0


class Supervisor:
    def __init__(self) -> None:
        self._processes: list[ManagedProcess] = []
        self._restarts: dict[str, _RestartState] = {}

    @property
    def processes(self) -> list[ManagedProcess]:
        return list(self._processes)

    def start(self, spec: ProcessSpec) -> ManagedProcess:
        process = ManagedProcess(spec)
        process.start()
        self._processes.append(process)
        self._restarts[spec.name] = _RestartState()
        return process

    def restart_counts(self) -> dict[str, int]:
        """How often each child was restarted after it crashed (for stack.json)."""
        return {name: state.total for name, state in self._restarts.items() if state.total}

    def check(self) -> SupervisorCheck:
        """Notice children that exited since the last check, and start again those whose
        restart delay has passed. Never waits: the other children keep running meanwhile."""
        now = time.monotonic()
        exits: list[ChildExit] = []
        restarted: list[ManagedProcess] = []
        for process in self._processes:
            state = self._restarts[process.name]
            if state.due_at is not None:
                if now >= state.due_at:
                    state.due_at = None
                    process.start()
                    restarted.append(process)
                continue
            exit_code = process.exit_code()
            if exit_code is None:
                continue
            process.kill_leftovers()
            exits.append(self._plan_restart(process, exit_code, state, now))
        return SupervisorCheck(exits, restarted)

    def _plan_restart(
        self, process: ManagedProcess, exit_code: int, state: _RestartState, now: float
    ) -> ChildExit:
        policy = process.spec.restart
        if policy is None:
            return ChildExit(process, exit_code, None, state.total)
        while state.recent and state.recent[0] < now - policy.window_seconds:
            state.recent.popleft()
        if len(state.recent) >= policy.max_restarts:
            logger.error(
                "%s exited with status %s after %s restarts within %.0f s; giving up",
                process.name,
                exit_code,
                len(state.recent),
                policy.window_seconds,
            )
            return ChildExit(process, exit_code, None, state.total)
        delay = policy.delay_seconds(len(state.recent))
        state.recent.append(now)
        state.total += 1
        state.due_at = now + delay
        message = (
            f"{process.name} exited with status {exit_code}; restarting it in {delay:.1f} s "
            f"(restart {state.total}; at most {policy.max_restarts} within {policy.window_seconds:.0f} s)"
        )
        logger.warning("%s", message)
        process.append_to_log(f"eaglenest up: {message}")
        return ChildExit(process, exit_code, delay, state.total)

    def stop_all(self) -> None:
        """Ask every child to stop at once (newest first), then wait for each in turn.

        Signalling all before waiting makes shutdown as slow as the slowest child rather
        than the sum of all; the api, started last, still gets its signal first.
        """
        processes = list(reversed(self._processes))
        for process in processes:
            process.request_stop()
        for process in processes:
            try:
                process.wait_stopped()
            except Exception:
                logger.exception("could not stop %s", process.name)
        self._processes.clear()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop_all()
