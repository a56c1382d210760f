"""A plain, session-free copy of the job row: what the pipeline reads while it runs.

Stages run for hours; holding an ORM object (and its session) that long would pin a
connection and, on SQLite, a lock. The pipeline works from this snapshot instead and
writes back through short units of work in ``worker.job_store``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus


@dataclass(frozen=True)
class JobSnapshot:
    id: int
    account_id: int
    name: str
    arn: str
    region: str
    role_arn: str
    status: OptimizationJobStatus
    model_source: dict[str, Any]
    source_model_container: dict[str, Any] | None
    optimization_configs: list[dict[str, Any]]
    optimization_environment: dict[str, str] | None
    output_config: dict[str, Any]
    stopping_condition: dict[str, Any]
    started_at: datetime | None
    created_at: datetime

    @classmethod
    def from_row(cls, job: OptimizationJob) -> JobSnapshot:
        return cls(
            id=job.id,
            account_id=job.account_id,
            name=job.name,
            arn=job.arn,
            region=job.region,
            role_arn=job.role_arn,
            status=job.status,
            model_source=dict(job.model_source),
            source_model_container=None
            if job.source_model_container is None
            else dict(job.source_model_container),
            optimization_configs=list(job.optimization_configs),
            optimization_environment=None
            if job.optimization_environment is None
            else dict(job.optimization_environment),
            output_config=dict(job.output_config),
            stopping_condition=dict(job.stopping_condition or {}),
            started_at=job.started_at,
            created_at=job.created_at,
        )

    @property
    def aws_account_id(self) -> str:
        """The 12-digit account of the job's ARN (arn:aws:sagemaker:region:account:...)."""
        return self.arn.split(":")[4]

    @property
    def max_runtime_seconds(self) -> int | None:
        """StoppingCondition.MaxRuntimeInSeconds, or None when the job has no limit."""
        value = self.stopping_condition.get("MaxRuntimeInSeconds")
        return None if value is None else int(value)

    @property
    def training_data_source(self) -> dict[str, Any] | None:
        """ModelSpeculativeDecodingConfig.TrainingDataSource; None means the built-in datasets."""
        for config in self.optimization_configs:
            speculative = config.get("ModelSpeculativeDecodingConfig")
            if speculative is not None:
                source: dict[str, Any] | None = speculative.get("TrainingDataSource")
                return source
        return None
