"""Starts the stack's children in order and stops them in reverse order."""

from __future__ import annotations

import logging
from types import TracebackType

from stack.processes import ManagedProcess, ProcessSpec

logger = logging.getLogger(__name__)


class Supervisor:
    def __init__(self) -> None:
        self._processes: list[ManagedProcess] = []

    @property
    def processes(self) -> list[ManagedProcess]:
        return list(self._processes)

    def start(self, spec: ProcessSpec) -> ManagedProcess:
        process = ManagedProcess(spec)
        process.start()
        self._processes.append(process)
        return process

    def first_exited(self) -> ManagedProcess | None:
        """A child that ended on its own: the stack cannot go on without it."""
        return next((p for p in self._processes if p.exit_code() is not None), None)

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
