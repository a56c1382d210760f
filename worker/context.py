"""What every pipeline stage receives: the job, the settings, progress reporting and stop checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Protocol

from core.eagle_knobs import EagleKnobs
from core.job_spec import JobSpec
from core.output_layout import OutputLayout
from core.s3 import s3_client
from core.s3_store import S3Store
from db.settings import Settings
from worker.artifact_cache import ArtifactCache, cache_root
from worker.artifacts import JobArtifacts
from worker.job_store import JobStore
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
    job: JobSpec
    settings: Settings
    monitor: JobMonitor
    record_progress: ProgressRecorder
    store: JobStore
    span: StageSpan = field(default_factory=lambda: StageSpan("starting", 0.0, 0.0))
    artifacts: JobArtifacts = field(default_factory=JobArtifacts)

    @property
    def stage(self) -> str:
        return self.span.name

    def check(self) -> None:
        """Raise StopRequestedError / MaxRuntimeExceededError if the job must end; cheap, call often."""
        self.monitor.check()

    def should_stop(self) -> bool:
        """The same condition as a bool, for the trainer's ``should_stop`` callback."""
        return self.monitor.should_stop()

    def seconds_left(self) -> float | None:
        """Seconds before MaxRuntimeInSeconds ends the job; None when it has no limit."""
        return self.monitor.remaining_seconds()

    def report(
        self, message: str, *, fraction: float | None = None, eta_seconds: float | None = None
    ) -> None:
        """Record progress of the running stage; ``fraction`` is how far *this stage* is (0..1)."""
        percent = None if fraction is None else self.span.overall_percent(fraction)
        self.record_progress(stage=self.stage, percent=percent, eta_seconds=eta_seconds, message=message)

    # -- shared resources, built on first use ---------------------------------------------
    @cached_property
    def s3(self) -> S3Store:
        """S3 as the job's role: every read and write of the job is signed with its credentials."""
        role = self.store.role_credentials(self.job)
        credentials = (role.access_key_id, role.secret_access_key)
        return S3Store(s3_client(self.settings, region=self.job.region, credentials=credentials))

    @cached_property
    def cache(self) -> ArtifactCache:
        return ArtifactCache(cache_root(self.settings))

    @cached_property
    def layout(self) -> OutputLayout:
        return OutputLayout.for_job(self.job)

    @property
    def knobs(self) -> EagleKnobs:
        """The job's EAGLE_* OptimizationEnvironment (``JobSpec.knobs``: parsed once, on first use)."""
        return self.job.knobs

    @property
    def work_dir(self) -> Path:
        """This job's local scratch space (the trainer's run directory, benchmark files)."""
        return job_work_dir(self.settings, self.job.id)


def job_work_dir(settings: Settings, job_id: int) -> Path:
    return cache_root(settings) / "jobs" / f"job-{job_id}"
