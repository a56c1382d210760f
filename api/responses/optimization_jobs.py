"""OptimizationJob rows as DescribeOptimizationJob / ListOptimizationJobs shapes."""

from __future__ import annotations

from datetime import datetime

from core.sagemaker.shapes.common import Tag, VpcConfig
from core.sagemaker.shapes.optimization_jobs import (
    DescribeOptimizationJobResponse,
    OptimizationConfig,
    OptimizationJobDetail,
    OptimizationJobEvent,
    OptimizationJobModelSource,
    OptimizationJobOutputConfig,
    OptimizationJobSummary,
    OptimizationOutput,
    StoppingCondition,
    WorkerProcess,
)
from db.models.job_event import JobEvent
from db.models.optimization_job import OptimizationJob
from db.models.resource_tag import ResourceTag


def optimization_types(job: OptimizationJob) -> list[str]:
    return [kind for kind in job.optimization_types.split(",") if kind]


def describe_optimization_job(job: OptimizationJob) -> DescribeOptimizationJobResponse:
    return DescribeOptimizationJobResponse(
        optimization_job_arn=job.arn,
        optimization_job_status=job.status.value,
        optimization_start_time=job.started_at,
        optimization_end_time=job.ended_at,
        creation_time=job.created_at,
        last_modified_time=job.last_modified_at,
        failure_reason=job.failure_reason,
        optimization_job_name=job.name,
        model_source=OptimizationJobModelSource.model_validate(job.model_source),
        optimization_environment=job.optimization_environment,
        deployment_instance_type=job.deployment_instance_type,
        max_instance_count=job.max_instance_count,
        optimization_configs=[OptimizationConfig.model_validate(item) for item in job.optimization_configs],
        output_config=OptimizationJobOutputConfig.model_validate(job.output_config),
        optimization_output=None
        if job.optimization_output is None
        else OptimizationOutput.model_validate(job.optimization_output),
        role_arn=job.role_arn,
        stopping_condition=StoppingCondition.model_validate(job.stopping_condition),
        vpc_config=None if job.vpc_config is None else VpcConfig.model_validate(job.vpc_config),
        training_plan_arns=job.training_plan_arns,
    )


def optimization_job_detail(
    job: OptimizationJob, *, events: list[JobEvent], tags: list[ResourceTag], now: datetime
) -> OptimizationJobDetail:
    eta_seconds = (
        None
        if job.estimated_completion_at is None
        else max(0.0, (job.estimated_completion_at - now).total_seconds())
    )
    return OptimizationJobDetail(
        **dict(describe_optimization_job(job)),
        stage=job.stage,
        progress_percent=job.progress_percent,
        estimated_completion_time=job.estimated_completion_at,
        eta_seconds=eta_seconds,
        last_message=job.last_message,
        deployment_recommendation=job.deployment_recommendation,
        events=[
            OptimizationJobEvent(
                time=event.occurred_at,
                status=event.status.value,
                stage=event.stage,
                message=event.message,
                worker=None if event.worker is None else WorkerProcess.model_validate(event.worker),
            )
            for event in events
        ],
        tags=[Tag(key=tag.key, value=tag.value) for tag in tags],
    )


def summarize_optimization_job(job: OptimizationJob) -> OptimizationJobSummary:
    return OptimizationJobSummary(
        optimization_job_name=job.name,
        optimization_job_arn=job.arn,
        creation_time=job.created_at,
        optimization_job_status=job.status.value,
        optimization_start_time=job.started_at,
        optimization_end_time=job.ended_at,
        last_modified_time=job.last_modified_at,
        deployment_instance_type=job.deployment_instance_type,
        max_instance_count=job.max_instance_count,
        optimization_types=optimization_types(job),
    )
