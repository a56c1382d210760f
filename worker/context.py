"""What every pipeline stage receives: the job, the settings, progress reporting and stop checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from db.settings import Settings
from worker.job_snapshot import JobSnapshot
from worker.monitor import JobMonitor


class ProgressRecorder(Protocol):
    def __call__(
        self, *, stage: str, percent: float | None, eta_seconds: float | None, message: str
    ) -> None: ...


@dataclass
class StageSpan:
    """The share of the job's overall progress (in percent) that the running stage covers."""

    name: str
    start_percent: float
    end_percent: float

    def overall_percent(self, fraction: float) -> float:
        fraction = min(1.0, max(0.0, fraction))
        return self.start_percent + fraction * (self.end_percent - self.start_percent)


@dataclass
class JobContext:
    job: JobSnapshot
    settings: Settings
    monitor: JobMonitor
    record_progress: ProgressRecorder
    span: StageSpan = field(default_factory=lambda: StageSpan("starting", 0.0, 0.0))

    @property
    def stage(self) -> str:
        return self.span.name

    def check(self) -> None:
        """Raise StopRequestedError / MaxRuntimeExceededError if the job must end; cheap, call often."""
        self.monitor.check()

    def should_stop(self) -> bool:
        """The same condition as a bool, for the trainer's ``should_stop`` callback."""
        return self.monitor.should_stop()

    def report(
        self, message: str, *, fraction: float | None = None, eta_seconds: float | None = None
    ) -> None:
        """Record progress of the running stage; ``fraction`` is how far *this stage* is (0..1)."""
        percent = None if fraction is None else self.span.overall_percent(fraction)
        self.record_progress(stage=self.stage, percent=percent, eta_seconds=eta_seconds, message=message)
