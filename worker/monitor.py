"""Watches a running job for StopOptimizationJob and for its MaxRuntimeInSeconds deadline.

One background thread does the polling so that the pipeline's own checks (``check()``,
``should_stop()``) cost nothing and can be called as often as a training loop likes.
Stages are expected to check cooperatively, which lets the trainer save a checkpoint and
exit cleanly. A stage that does not check within ``interrupt_grace_seconds`` is interrupted:
the monitor sends SIGALRM to the main thread and the handler raises the same exception a
cooperative check would have raised, the way Celery's soft time limit does.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

from core.job_errors import JobInterruptedError, MaxRuntimeExceededError, StopRequestedError

logger = logging.getLogger(__name__)

# SIGALRM is unused by Celery's prefork children (they use SIGUSR1 for soft time limits).
INTERRUPT_SIGNAL = signal.SIGALRM


@dataclass(frozen=True)
class RuntimeLimit:
    """StoppingCondition.MaxRuntimeInSeconds and how much of it is left when watching starts."""

    max_runtime_seconds: int
    remaining_seconds: float


class JobMonitor:
    """Context manager: start watching on enter, stop (and restore the signal handler) on exit."""

    def __init__(
        self,
        *,
        stop_requested: Callable[[], bool],
        runtime_limit: RuntimeLimit | None,
        poll_interval_seconds: float = 1.0,
        interrupt_grace_seconds: float = 5.0,
    ) -> None:
        self._stop_requested = stop_requested
        self._runtime_limit = runtime_limit
        self._deadline = None if runtime_limit is None else time.monotonic() + runtime_limit.remaining_seconds
        self._poll_interval = poll_interval_seconds
        self._interrupt_grace = interrupt_grace_seconds
        self._lock = threading.Lock()
        self._reason: JobInterruptedError | None = None
        self._finished = threading.Event()
        self._thread: threading.Thread | None = None
        self._main_thread_id: int | None = None
        self._previous_handler: Any = None

    # -- what the pipeline calls ---------------------------------------------------------
    def check(self) -> None:
        """Raise StopRequestedError or MaxRuntimeExceededError once either has happened."""
        reason = self.interruption
        if reason is not None:
            raise reason

    def should_stop(self) -> bool:
        """The trainer's stop flag: true once the job must end, for whichever reason."""
        return self.interruption is not None

    def remaining_seconds(self) -> float | None:
        """Seconds left before MaxRuntimeInSeconds ends the job; None without a limit."""
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    @property
    def interruption(self) -> JobInterruptedError | None:
        with self._lock:
            if self._reason is None and self._runtime_limit is not None and self._deadline_passed():
                self._reason = MaxRuntimeExceededError(self._runtime_limit.max_runtime_seconds)
            return self._reason

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> JobMonitor:
        if threading.current_thread() is threading.main_thread():
            # Only the main thread can receive a Python signal handler's exception.
            self._main_thread_id = threading.get_ident()
            self._previous_handler = signal.signal(INTERRUPT_SIGNAL, self._on_interrupt_signal)
        self._thread = threading.Thread(target=self._watch, name="job-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Set before restoring the handler: a signal already in flight is then ignored.
        self._finished.set()
        if self._thread is not None:
            self._thread.join(timeout=self._poll_interval + 5)
        if self._main_thread_id is not None:
            signal.signal(INTERRUPT_SIGNAL, self._previous_handler)

    # -- the watching thread --------------------------------------------------------------
    def _watch(self) -> None:
        interrupted_at: float | None = None
        while not self._finished.wait(self._poll_interval):
            if self.interruption is None and self._poll_stop_request():
                with self._lock:
                    self._reason = self._reason or StopRequestedError()
            if self.interruption is None:
                continue
            now = time.monotonic()
            if interrupted_at is None:
                interrupted_at = now
                logger.info("job interrupted: %s; waiting for the running stage to notice", self._reason)
            elif now - interrupted_at >= self._interrupt_grace and self._main_thread_id is not None:
                logger.warning(
                    "stage ignored the interruption for %.0f s; interrupting it", now - interrupted_at
                )
                signal.pthread_kill(self._main_thread_id, INTERRUPT_SIGNAL)
                interrupted_at = now  # repeat after another grace period if still running

    def _poll_stop_request(self) -> bool:
        try:
            return self._stop_requested()
        except Exception:
            # A database hiccup must not kill the watcher; the next poll tries again.
            logger.exception("could not read the job's stop flag")
            return False

    def _on_interrupt_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._finished.is_set():
            return
        reason = self.interruption
        if reason is not None:
            raise reason

    def _deadline_passed(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline
