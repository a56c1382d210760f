"""The job's typed spec: a plain, session-free copy of the job row, its request parsed once.

Stages run for hours; holding an ORM object (and its session) that long would pin a
connection and, on SQLite, a lock. The pipeline works from this spec instead and writes
back through short units of work in ``worker.job_store``.

The row stores the CreateOptimizationJob request as the api validated it (PascalCase JSON);
``JobSpec.from_row`` parses it back into the api's own request shapes, so the pipeline reads
``job.output_config.s3_output_location`` instead of picking keys out of dicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

from pydantic import ValidationError

from core.eagle_knobs import EagleKnobError, EagleKnobs
from core.job_errors import JobFailedError
from core.sagemaker.shapes.base import AwsShape
from core.sagemaker.shapes.optimization_jobs import (
    ModelSpeculativeDecodingTrainingDataSource,
    OptimizationConfig,
    OptimizationJobModelSource,
    OptimizationJobOutputConfig,
    StoppingCondition,
)
from core.sagemaker.shapes.sagemaker_models import ContainerDefinition
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus

ShapeT = TypeVar("ShapeT", bound=AwsShape)


class InvalidJobSpecError(JobFailedError):
    """The row's stored request does not parse (a row edited by hand: the api stores valid ones)."""


@dataclass(frozen=True)
class JobSpec:
    id: int
    account_id: int
    name: str
    arn: str
    region: str
    role_arn: str
    status: OptimizationJobStatus
    model_source: OptimizationJobModelSource
    # ModelSource.SageMakerModel's PrimaryContainer, as CreateOptimizationJob snapshotted it.
    source_model_container: ContainerDefinition | None
    optimization_configs: list[OptimizationConfig]
    optimization_environment: dict[str, str] | None
    output_config: OptimizationJobOutputConfig
    stopping_condition: StoppingCondition
    started_at: datetime | None
    created_at: datetime
    # Chooses the Celery queue the job and its distillation shards run on (core.job_queue).
    deployment_instance_type: str = ""

    @classmethod
    def from_row(cls, job: OptimizationJob) -> JobSpec:
        """The row's columns, its request members parsed; raises InvalidJobSpecError if one does not."""
        return cls(
            id=job.id,
            account_id=job.account_id,
            name=job.name,
            arn=job.arn,
            region=job.region,
            role_arn=job.role_arn,
            status=job.status,
            model_source=_parse("ModelSource", OptimizationJobModelSource.model_validate, job.model_source),
            source_model_container=None
            if job.source_model_container is None
            else _parse("PrimaryContainer", ContainerDefinition.model_validate, job.source_model_container),
            optimization_configs=[
                _parse(f"OptimizationConfigs.{index}", OptimizationConfig.model_validate, config)
                for index, config in enumerate(job.optimization_configs, 1)
            ],
            optimization_environment=None
            if job.optimization_environment is None
            else dict(job.optimization_environment),
            output_config=_parse(
                "OutputConfig", OptimizationJobOutputConfig.model_validate, job.output_config
            ),
            stopping_condition=_parse(
                "StoppingCondition", StoppingCondition.model_validate, job.stopping_condition or {}
            ),
            started_at=job.started_at,
            created_at=job.created_at,
            deployment_instance_type=job.deployment_instance_type,
        )

    @property
    def aws_account_id(self) -> str:
        """The 12-digit account of the job's ARN (arn:aws:sagemaker:region:account:...)."""
        return self.arn.split(":")[4]

    @property
    def max_runtime_seconds(self) -> int | None:
        """StoppingCondition.MaxRuntimeInSeconds, or None when the job has no limit."""
        return self.stopping_condition.max_runtime_in_seconds

    @property
    def training_data_source(self) -> ModelSpeculativeDecodingTrainingDataSource | None:
        """ModelSpeculativeDecodingConfig.TrainingDataSource; None means the built-in datasets."""
        for config in self.optimization_configs:
            speculative = config.model_speculative_decoding_config
            if speculative is not None:
                return speculative.training_data_source
        return None

    @property
    def output_model_name(self) -> str | None:
        """OutputConfig.SageMakerModel.ModelName: the model to register once the job completes."""
        model = self.output_config.sage_maker_model
        return None if model is None or not model.model_name else model.model_name

    @cached_property
    def knobs(self) -> EagleKnobs:
        """The EAGLE_* OptimizationEnvironment, parsed by the api's own model on first use.

        Parsed lazily so that a bad knob fails the job in the stage that first reads it
        (validate does, before any download) rather than when the job is claimed.
        """
        try:
            return EagleKnobs.from_environment(self.optimization_environment)
        except EagleKnobError as error:
            raise JobFailedError(f"OptimizationEnvironment: {error}") from error


def _parse(member: str, validate: Callable[[Any], ShapeT], value: Any) -> ShapeT:
    try:
        return validate(value)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in (member, *detail['loc']))}: {detail['msg']}"
            for detail in error.errors()
        )
        raise InvalidJobSpecError(f"The job's stored request cannot be read: {problems}") from None
