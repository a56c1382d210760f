"""Response bodies of the dashboard's JSON routes (PascalCase, like the rest of the api)."""

from __future__ import annotations

from pydantic import Field

from core.sagemaker.shapes.base import AwsShape, AwsTimestamp
from core.sagemaker.shapes.endpoints import DescribeEndpointOutput
from core.sagemaker.shapes.sagemaker_models import DescribeModelOutput


class DashboardJob(AwsShape):
    """One row of the jobs table: ListOptimizationJobs' summary plus live progress and inputs."""

    optimization_job_name: str
    optimization_job_arn: str
    optimization_job_status: str
    stage: str | None = None
    progress_percent: float | None = None
    eta_seconds: float | None = Field(default=None, description="Seconds to the current stage's end.")
    last_message: str | None = None
    model: str = Field(description="The ModelSource: its S3 URI or the SageMaker model's name.")
    technique: str | None = Field(default=None, description="ModelSpeculativeDecodingConfig.Technique.")
    creation_time: AwsTimestamp
    optimization_start_time: AwsTimestamp | None = None
    optimization_end_time: AwsTimestamp | None = None
    failure_reason: str | None = None


class DashboardJobList(AwsShape):
    jobs: list[DashboardJob]
    next_token: str | None = None


class TrainingPointShape(AwsShape):
    step: int
    total_steps: int
    elapsed_seconds: float
    loss: float | None = None
    step_accuracy: list[float] = Field(description="Draft accuracy by position (0 = first draft token).")


class TrainingCurve(AwsShape):
    points: list[TrainingPointShape] = Field(description="In step order; a long run's are thinned out.")


class PublishedArtifact(AwsShape):
    path: str
    uri: str
    sha256: str | None = None
    size: int | None = None


class BenchmarkTableRowShape(AwsShape):
    """The SageMaker benchmark table's columns plus EAGLE's acceptance length (means, ms)."""

    configuration: str
    concurrency: int
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: float | None = None
    request_throughput: float
    output_throughput: float
    otps_per_request: float
    acceptance_length: float | None = None
    k: str | None = Field(default=None, description="Draft tokens per step: a number, 'adaptive', or none.")
    speedup_vs_no_eagle: float | None = None


class JobResults(AwsShape):
    """What the job published under S3OutputLocation, read back from S3."""

    available: bool
    reason: str | None = Field(default=None, description="Why there are no results (when not available).")
    output_location: str
    lineage_uri: str
    artifacts: list[PublishedArtifact] = Field(default_factory=list)
    benchmark: list[BenchmarkTableRowShape] = Field(default_factory=list)
    metric_definitions: dict[str, str] = Field(
        default_factory=dict, description="What each benchmark column means, as results.json states it."
    )
    request_shortfalls: list[str] = Field(
        default_factory=list,
        description="The benchmark rows that measured fewer requests than a level sent, and why "
        "(errored, still in flight when the level ended, or never sent), as results.json states them.",
    )


class DashboardModelList(AwsShape):
    models: list[DescribeModelOutput]
    next_token: str | None = None


class DashboardEndpointInstance(AwsShape):
    generation: int
    ordinal: int
    status: str = Field(description="Pending, InService or Failed (restarting).")
    restarts: int
    message: str | None = None


class DashboardEndpointLive(AwsShape):
    """Read from the serving instances now (their own /metrics)."""

    instances_answering: int
    requests_running: float
    generated_tokens: float = Field(description="Tokens the serving instances generated since they started.")
    acceptance_length: float | None = Field(
        default=None,
        description="Tokens per target step (1 + accepted drafts / verifications); none without a head.",
    )


class DashboardEndpoint(AwsShape):
    endpoint: DescribeEndpointOutput
    instances: list[DashboardEndpointInstance]
    live: DashboardEndpointLive


class DashboardEndpointList(AwsShape):
    endpoints: list[DashboardEndpoint]
    next_token: str | None = None
