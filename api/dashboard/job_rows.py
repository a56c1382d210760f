"""An OptimizationJob row as one line of the dashboard's jobs table."""

from __future__ import annotations

from datetime import datetime

from api.dashboard.shapes import DashboardJob
from core.sagemaker.shapes.optimization_jobs import OptimizationConfig, OptimizationJobModelSource
from db.models.optimization_job import OptimizationJob


def model_label(job: OptimizationJob) -> str:
    """The model the job optimizes, as its request named it."""
    source = OptimizationJobModelSource.model_validate(job.model_source)
    if source.s3 is not None and source.s3.s3_uri:
        return source.s3.s3_uri
    if source.sage_maker_model is not None and source.sage_maker_model.model_name:
        return f"SageMaker model {source.sage_maker_model.model_name}"
    return "(no model source)"


def technique(job: OptimizationJob) -> str | None:
    for item in job.optimization_configs:
        config = OptimizationConfig.model_validate(item).model_speculative_decoding_config
        if config is not None:
            return config.technique
    return None


def dashboard_job(job: OptimizationJob, *, now: datetime) -> DashboardJob:
    eta_seconds = (
        None
        if job.estimated_completion_at is None or job.status.is_terminal
        else max(0.0, (job.estimated_completion_at - now).total_seconds())
    )
    return DashboardJob(
        optimization_job_name=job.name,
        optimization_job_arn=job.arn,
        optimization_job_status=job.status.value,
        stage=job.stage,
        progress_percent=job.progress_percent,
        eta_seconds=eta_seconds,
        last_message=job.last_message,
        model=model_label(job),
        technique=technique(job),
        creation_time=job.created_at,
        optimization_start_time=job.started_at,
        optimization_end_time=job.ended_at,
        failure_reason=job.failure_reason,
    )
