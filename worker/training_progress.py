"""The trainer's progress callback: job progress in the database and checkpoints on S3.

The trainer calls back after every optimizer step; the job row is written at most every
``interval_seconds`` (and at every change of the trainer's stage), so a fast loop does not
turn into a stream of database writes. Every training step's loss and per-position
accuracy is kept too (the dashboard plots them), buffered and written with those reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from db.queries.training_point import NewTrainingPoint
from trainer.eagle.reporting import TrainProgress, describe_progress
from worker.context import JobContext

DEFAULT_INTERVAL_SECONDS = 2.0


class TrainingProgress:
    def __init__(
        self,
        ctx: JobContext,
        *,
        budget_seconds: float | None,
        on_step: Callable[[], object] | None = None,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
    ) -> None:
        self.ctx = ctx
        self.budget_seconds = budget_seconds
        self.on_step = on_step
        self.interval_seconds = interval_seconds
        self._last_stage: str | None = None
        self._last_report = 0.0
        self.last: TrainProgress | None = None
        self._unsaved_points: list[NewTrainingPoint] = []

    def __call__(self, progress: TrainProgress) -> None:
        self.last = progress
        if progress.stage == "training" and progress.loss is not None:
            self._unsaved_points.append(training_point(progress))
        if self.on_step is not None:
            self.on_step()
        now = time.monotonic()
        if progress.stage == self._last_stage and now - self._last_report < self.interval_seconds:
            return
        self._last_stage, self._last_report = progress.stage, now
        self.save_points()
        self.ctx.report(
            describe_progress(progress), fraction=self.fraction(progress), eta_seconds=self.eta(progress)
        )

    def save_points(self) -> None:
        """Write the buffered training steps (the report that follows makes them current)."""
        if self._unsaved_points:
            self.ctx.store.record_training_points(self.ctx.job.id, self._unsaved_points)
            self._unsaved_points = []

    def fraction(self, progress: TrainProgress) -> float | None:
        if progress.stage == "done":
            return 1.0
        if self.budget_seconds:
            return min(0.99, progress.elapsed_seconds / self.budget_seconds)
        if progress.stage == "training" and progress.total_steps:
            return min(0.99, progress.step / progress.total_steps)
        return None

    def eta(self, progress: TrainProgress) -> float | None:
        if progress.eta_seconds is not None:
            return max(0.0, progress.eta_seconds)
        if self.budget_seconds:
            return max(0.0, self.budget_seconds - progress.elapsed_seconds)
        return None


def training_point(progress: TrainProgress) -> NewTrainingPoint:
    return NewTrainingPoint(
        step=progress.step,
        total_steps=progress.total_steps,
        elapsed_seconds=progress.elapsed_seconds,
        loss=progress.loss,
        step_accuracy=list(progress.step_accuracy),
    )
