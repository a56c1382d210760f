"""An optimization job: the request as submitted plus everything the worker reports."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Enum, Float, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from db.base import Base, IdMixin, TimestampMixin
from db.models.account import Account
from db.models.optimization_job_status import OptimizationJobStatus
from db.types import JsonDocument, UtcDateTime


def optimization_job_status_type() -> Enum:
    """VARCHAR plus a CHECK constraint (portable to SQLite); one instance per column."""
    return Enum(
        OptimizationJobStatus,
        name="optimization_job_status",
        native_enum=False,
        create_constraint=True,
        length=16,
        values_callable=lambda statuses: [status.value for status in statuses],
    )


class OptimizationJob(IdMixin, TimestampMixin, Base):
    __tablename__ = "optimization_jobs"
    __table_args__ = (
        UniqueConstraint("account_id", "region", "name_key"),
        Index("ix_optimization_jobs_account_id_created_at", "account_id", "created_at"),
        Index("ix_optimization_jobs_account_id_status", "account_id", "status"),
    )

    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(63))
    # Lower-cased name: SageMaker ARNs are lower-case, so names are unique case-insensitively.
    name_key: Mapped[str] = mapped_column(String(63))
    region: Mapped[str] = mapped_column(String(32))
    arn: Mapped[str] = mapped_column(String(256))

    # CreateOptimizationJob request members, stored as the API echoes them (PascalCase JSON).
    role_arn: Mapped[str] = mapped_column(String(2048))
    model_source: Mapped[dict[str, Any]] = mapped_column(JsonDocument)
    deployment_instance_type: Mapped[str] = mapped_column(String(64))
    max_instance_count: Mapped[int | None]
    optimization_environment: Mapped[dict[str, str] | None] = mapped_column(JsonDocument)
    optimization_configs: Mapped[list[dict[str, Any]]] = mapped_column(JsonDocument)
    output_config: Mapped[dict[str, Any]] = mapped_column(JsonDocument)
    stopping_condition: Mapped[dict[str, Any]] = mapped_column(JsonDocument)
    vpc_config: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    training_plan_arns: Mapped[list[str] | None] = mapped_column(JsonDocument)
    # Comma-separated OptimizationTypes (e.g. "SpeculativeDecoding") for the list filter.
    optimization_types: Mapped[str] = mapped_column(String(256))
    # When ModelSource names a SageMaker model: its PrimaryContainer at creation time, so
    # deleting or re-creating that model later cannot change what a running job trains on.
    source_model_container: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)

    status: Mapped[OptimizationJobStatus] = mapped_column(optimization_job_status_type())
    stage: Mapped[str | None] = mapped_column(String(64))
    progress_percent: Mapped[float | None] = mapped_column(Float)
    estimated_completion_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    progress_updated_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    last_message: Mapped[str | None] = mapped_column(Text)
    failure_reason: Mapped[str | None] = mapped_column(Text)
    optimization_output: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    # What the job's benchmark says to deploy at each concurrency level (results.json's
    # "recommendation"); AWS's OptimizationOutput has no member for it, the REST face shows it.
    deployment_recommendation: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    celery_task_id: Mapped[str | None] = mapped_column(String(255))
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime())

    account: Mapped[Account] = relationship(lazy="raise")
