"""A running job's CloudWatch stream: ``/aws/sagemaker/OptimizationJobs``, stream ``<job name>``.

While the job runs, everything this worker process logs (INFO and up) and every progress
report of the pipeline lands in the job's stream, so ``aws logs tail`` (CLI v2),
``filter-log-events`` and the SDK show the stages as they happen. Lines are buffered and
written once a second by a thread of their own: a slow database never slows a stage, and a
failed write is retried with the next batch instead of failing the job.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from core.job_spec import JobSpec
from core.services.log_writer import OPTIMIZATION_JOBS_GROUP, now_ms
from worker.context import ProgressRecorder
from worker.log_buffer import LogBuffer, LogTarget, SessionScope
from worker.outcome import Outcome

# Progress with an unchanged stage and message is written at most this often.
_PROGRESS_REPEAT_MS = 10_000


class JobLogStream:
    def __init__(
        self, session_scope: SessionScope, job: JobSpec, *, retention_in_days: int, flush_seconds: float = 1.0
    ) -> None:
        self._job = job
        self._buffer = LogBuffer(
            session_scope,
            LogTarget(
                account_id=job.account_id,
                region=job.region,
                group_name=OPTIMIZATION_JOBS_GROUP,
                stream_name=job.name,
                retention_in_days=retention_in_days,
            ),
        )
        self._flush_seconds = flush_seconds
        self._stopped = threading.Event()
        self._flusher: threading.Thread | None = None
        self._handler = _StreamHandler(self)
        self._last_progress: tuple[str, str, int] | None = None

    def write(self, message: str, timestamp_ms: int | None = None) -> None:
        self._buffer.write(message, timestamp_ms)

    def recording(self, record_progress: ProgressRecorder) -> ProgressRecorder:
        """``record_progress`` that also writes the report to the stream (a new stage at once)."""

        def record(*, stage: str, percent: float | None, eta_seconds: float | None, message: str) -> None:
            record_progress(stage=stage, percent=percent, eta_seconds=eta_seconds, message=message)
            now = now_ms()
            last = self._last_progress
            if last is None or (stage, message) != last[:2] or now - last[2] >= _PROGRESS_REPEAT_MS:
                done = "" if percent is None else f" ({percent:.0f}%)"
                self.write(f"[{stage}]{done} {message}", now)
                self._last_progress = (stage, message, now)

        return record

    def write_outcome(self, outcome: Outcome) -> None:
        reason = f": {outcome.failure_reason}" if outcome.failure_reason else ""
        self.write(f"Optimization job {self._job.name} ended {outcome.status}{reason}")

    def _flush_until_stopped(self) -> None:
        while not self._stopped.wait(self._flush_seconds):
            self._buffer.flush()

    @property
    def flusher_ident(self) -> int | None:
        return None if self._flusher is None else self._flusher.ident

    def __enter__(self) -> JobLogStream:
        self.write(f"Optimization job {self._job.name} started")
        logging.getLogger().addHandler(self._handler)
        self._flusher = threading.Thread(target=self._flush_until_stopped, name="job-logs", daemon=True)
        self._flusher.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        logging.getLogger().removeHandler(self._handler)
        self._stopped.set()
        if self._flusher is not None:
            self._flusher.join(timeout=10)
        self._buffer.flush()


class _StreamHandler(logging.Handler):
    """Root-logger records of this process into the stream, except the flusher's own."""

    def __init__(self, stream: JobLogStream) -> None:
        super().__init__(level=logging.INFO)
        self._stream = stream
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        # The flusher's own records (a failed write) would feed themselves back in.
        if record.thread == self._stream.flusher_ident:
            return
        try:
            self._stream.write(self.format(record), int(record.created * 1000))
        except Exception:
            self.handleError(record)
