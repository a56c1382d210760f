"""TrainingProgress keeps every training step for the dashboard, written along with the reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import cast

import pytest

from db.queries.training_point import NewTrainingPoint
from trainer.eagle.reporting import TrainProgress
from worker.context import JobContext
from worker.training_progress import TrainingProgress


@dataclass
class RecordingStore:
    saved: list[list[NewTrainingPoint]] = field(default_factory=list)

    def record_training_points(self, job_id: int, points: list[NewTrainingPoint]) -> None:
        assert job_id == 7
        self.saved.append(list(points))


@dataclass
class RecordingContext:
    """The two things TrainingProgress uses of a JobContext: the job's id and report()/store."""

    store: RecordingStore = field(default_factory=RecordingStore)
    reports: list[str] = field(default_factory=list)
    job: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(id=7))

    def report(
        self, message: str, *, fraction: float | None = None, eta_seconds: float | None = None
    ) -> None:
        # Points reach the database before the report that announces them.
        self.reports.append(f"{message} (after {sum(len(batch) for batch in self.store.saved)} points)")


def step(number: int, *, stage: str = "training", loss: float | None = 2.0) -> TrainProgress:
    return TrainProgress(
        stage=stage, step=number, total_steps=10, loss=loss, step_accuracy=[0.5, 0.2], elapsed_seconds=number
    )


@pytest.fixture
def context() -> RecordingContext:
    return RecordingContext()


def test_every_step_is_kept_though_reports_are_throttled(context: RecordingContext) -> None:
    progress = TrainingProgress(cast(JobContext, context), budget_seconds=None, interval_seconds=3600)
    for number in range(1, 6):
        progress(step(number, loss=1.0 / number))
    # The first step reports at once (a new stage); the next four wait for the interval...
    assert [len(batch) for batch in context.store.saved] == [1]
    progress(step(5, stage="exporting", loss=None))
    # ...and go out with the next report, at the change of stage, before its message.
    assert [[p.step for p in batch] for batch in context.store.saved] == [[1], [2, 3, 4, 5]]
    assert context.reports[-1] == "exporting at step 5/10 (after 5 points)"
    saved = context.store.saved[1][-1]
    assert (saved.loss, saved.step_accuracy, saved.total_steps, saved.elapsed_seconds) == (
        0.2,
        [0.5, 0.2],
        10,
        5,
    )


def test_steps_since_the_last_report_are_saved_at_the_end(context: RecordingContext) -> None:
    progress = TrainingProgress(cast(JobContext, context), budget_seconds=None, interval_seconds=3600)
    progress(step(1))
    progress(step(2))
    progress.save_points()
    progress.save_points()  # nothing new: no empty write
    assert [[p.step for p in batch] for batch in context.store.saved] == [[1], [2]]


def test_data_stages_record_no_points(context: RecordingContext) -> None:
    progress = TrainingProgress(cast(JobContext, context), budget_seconds=None, interval_seconds=0)
    progress(step(3, stage="tokenizing", loss=None))
    progress(step(1, stage="training", loss=None))  # no loss yet: nothing to plot
    assert context.store.saved == []
