"""One entry of an optimization job's history: a status or stage change, with its message."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from db.base import Base, IdMixin
from db.models.optimization_job import OptimizationJob, optimization_job_status_type
from db.models.optimization_job_status import OptimizationJobStatus
from db.types import JsonDocument, UtcDateTime, utc_now


class JobEvent(IdMixin, Base):
    __tablename__ = "job_events"
    __table_args__ = (Index("ix_job_events_job_id_occurred_at", "job_id", "occurred_at"),)

    job_id: Mapped[int] = mapped_column(ForeignKey("optimization_jobs.id", ondelete="CASCADE"))
    occurred_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utc_now)
    status: Mapped[OptimizationJobStatus] = mapped_column(optimization_job_status_type())
    stage: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)
    # The worker process that recorded it: {"hostname", "pid", "device"}; None for the api's events.
    worker: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument, default=None)

    job: Mapped[OptimizationJob] = relationship(lazy="raise")
