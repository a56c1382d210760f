"""One training step of a job as the worker saw it: loss and per-position draft accuracy.

The job row only keeps the latest progress message; these rows keep the curve, so the
dashboard can plot loss and acceptance by position while the job still trains.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Index
from sqlalchemy.orm import Mapped, mapped_column, relationship

from db.base import Base, IdMixin
from db.models.optimization_job import OptimizationJob
from db.types import JsonDocument, UtcDateTime, utc_now


class TrainingPoint(IdMixin, Base):
    __tablename__ = "training_points"
    __table_args__ = (Index("ix_training_points_job_id_step", "job_id", "step"),)

    job_id: Mapped[int] = mapped_column(ForeignKey("optimization_jobs.id", ondelete="CASCADE"))
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utc_now)
    step: Mapped[int]
    total_steps: Mapped[int]
    elapsed_seconds: Mapped[float] = mapped_column(Float)
    loss: Mapped[float | None] = mapped_column(Float)
    # Accuracy of draft position 0, 1, ... on this step's batch (the TTT acceptance proxy).
    step_accuracy: Mapped[list[float]] = mapped_column(JsonDocument)

    job: Mapped[OptimizationJob] = relationship(lazy="raise")
