"""Repository functions for a job's training curve (db/models/training_point.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models.training_point import TrainingPoint


@dataclass(frozen=True)
class NewTrainingPoint:
    step: int
    total_steps: int
    elapsed_seconds: float
    loss: float | None
    step_accuracy: list[float]


def add_training_points(session: Session, *, job_id: int, points: Sequence[NewTrainingPoint]) -> None:
    session.add_all(
        TrainingPoint(
            job_id=job_id,
            step=point.step,
            total_steps=point.total_steps,
            elapsed_seconds=point.elapsed_seconds,
            loss=point.loss,
            step_accuracy=list(point.step_accuracy),
        )
        for point in points
    )
    session.flush()


def list_training_points(session: Session, *, job_id: int, max_points: int) -> list[TrainingPoint]:
    """The curve in step order, at most ``max_points`` of it (evenly thinned, last step kept).

    A job resumed from a checkpoint trains some steps again; the latest record of a step wins.
    """
    if max_points < 1:
        raise ValueError(f"max_points must be at least 1, got {max_points}")
    rows = session.scalars(
        select(TrainingPoint)
        .where(TrainingPoint.job_id == job_id)
        .order_by(TrainingPoint.step, TrainingPoint.id)
    )
    latest: dict[int, TrainingPoint] = {}
    for row in rows:
        latest[row.step] = row
    curve = list(latest.values())
    if len(curve) <= max_points:
        return curve
    if max_points == 1:
        return [curve[-1]]
    # Evenly spaced indices from the first to the last step (both kept).
    last = len(curve) - 1
    return [curve[round(index * last / (max_points - 1))] for index in range(max_points)]
