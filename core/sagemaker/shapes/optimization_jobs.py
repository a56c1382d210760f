"""Shapes of Create/Describe/List/Stop/DeleteOptimizationJob."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from core.sagemaker.shapes.base import AwsRequest, AwsShape, AwsTimestamp
from core.sagemaker.shapes.common import Tag, VpcConfig
from core.sagemaker.shapes.listing import ListByStatusInput


class OptimizationModelAccessConfig(AwsShape):
    accept_eula: bool


class OptimizationJobModelSourceS3(AwsShape):
    s3_uri: str | None = None
    model_access_config: OptimizationModelAccessConfig | None = None


class OptimizationSageMakerModel(AwsShape):
    model_name: str | None = None


class OptimizationJobModelSource(AwsShape):
    s3: OptimizationJobModelSourceS3 | None = None
    sage_maker_model: OptimizationSageMakerModel | None = None


class ModelOptimizationContainerConfig(AwsShape):
    """botocore's ModelQuantizationConfig, ModelCompilationConfig and ModelShardingConfig."""

    botocore_shape: ClassVar[str | None] = "ModelQuantizationConfig"

    image: str | None = None
    override_environment: dict[str, str] | None = None


class ModelSpeculativeDecodingTrainingDataSource(AwsShape):
    s3_uri: str
    s3_data_type: str


class ModelSpeculativeDecodingConfig(AwsShape):
    technique: str
    training_data_source: ModelSpeculativeDecodingTrainingDataSource | None = None


class OptimizationConfig(AwsShape):
    """A tagged union: exactly one member is set (the service model enforces it)."""

    model_quantization_config: ModelOptimizationContainerConfig | None = None
    model_compilation_config: ModelOptimizationContainerConfig | None = None
    model_sharding_config: ModelOptimizationContainerConfig | None = None
    model_speculative_decoding_config: ModelSpeculativeDecodingConfig | None = None


class OptimizationJobOutputConfig(AwsShape):
    kms_key_id: str | None = None
    s3_output_location: str
    sage_maker_model: OptimizationSageMakerModel | None = None


class StoppingCondition(AwsShape):
    max_runtime_in_seconds: int | None = None
    max_wait_time_in_seconds: int | None = None
    max_pending_time_in_seconds: int | None = None


class OptimizationOutput(AwsShape):
    recommended_inference_image: str | None = None


class CreateOptimizationJobRequest(AwsRequest):
    aws_shape: ClassVar[str] = "CreateOptimizationJobRequest"

    optimization_job_name: str
    role_arn: str
    model_source: OptimizationJobModelSource
    deployment_instance_type: str
    max_instance_count: int | None = None
    optimization_environment: dict[str, str] | None = None
    optimization_configs: list[OptimizationConfig]
    output_config: OptimizationJobOutputConfig
    stopping_condition: StoppingCondition
    tags: list[Tag] | None = None
    vpc_config: VpcConfig | None = None
    training_plan_arns: list[str] | None = None


class CreateOptimizationJobResponse(AwsShape):
    optimization_job_arn: str


class DescribeOptimizationJobRequest(AwsRequest):
    aws_shape: ClassVar[str] = "DescribeOptimizationJobRequest"

    optimization_job_name: str


class DescribeOptimizationJobResponse(AwsShape):
    optimization_job_arn: str
    optimization_job_status: str
    optimization_start_time: AwsTimestamp | None = None
    optimization_end_time: AwsTimestamp | None = None
    creation_time: AwsTimestamp
    last_modified_time: AwsTimestamp
    failure_reason: str | None = None
    optimization_job_name: str
    model_source: OptimizationJobModelSource
    optimization_environment: dict[str, str] | None = None
    deployment_instance_type: str
    max_instance_count: int | None = None
    optimization_configs: list[OptimizationConfig]
    output_config: OptimizationJobOutputConfig
    optimization_output: OptimizationOutput | None = None
    role_arn: str
    stopping_condition: StoppingCondition
    vpc_config: VpcConfig | None = None
    training_plan_arns: list[str] | None = None


class WorkerProcess(AwsShape):
    """The worker process that recorded an event (REST only)."""

    hostname: str
    pid: int
    device: str = Field(description="cuda when the process saw a GPU, else cpu.")


class OptimizationJobEvent(AwsShape):
    """One entry of a job's history (REST only; AWS has no such member)."""

    time: AwsTimestamp
    status: str
    stage: str | None = None
    message: str
    worker: WorkerProcess | None = Field(
        default=None, description="The worker that entered the stage (or ran the distillation shard)."
    )


class OptimizationJobDetail(DescribeOptimizationJobResponse):
    """REST describe: DescribeOptimizationJob's body plus live progress, history and tags."""

    stage: str | None = Field(default=None, description="Pipeline stage the worker is in.")
    progress_percent: float | None = Field(default=None, description="Progress of the stage, 0-100.")
    estimated_completion_time: AwsTimestamp | None = Field(
        default=None, description="When the worker expects the current stage to finish."
    )
    eta_seconds: float | None = Field(default=None, description="Seconds until then, at response time.")
    last_message: str | None = Field(default=None, description="The worker's latest message.")
    deployment_recommendation: dict[str, Any] | None = Field(
        default=None,
        description="Once COMPLETED: what to deploy at each concurrency level -- the fastest "
        "configuration, or plain decoding where no head beat No EAGLE beyond the noise margin "
        "(benchmark/results.json's 'recommendation').",
    )
    events: list[OptimizationJobEvent] = Field(default_factory=list)
    tags: list[Tag] = Field(default_factory=list)


class ListOptimizationJobsRequest(ListByStatusInput):
    aws_shape: ClassVar[str] = "ListOptimizationJobsRequest"

    optimization_contains: str | None = None


class OptimizationJobSummary(AwsShape):
    optimization_job_name: str
    optimization_job_arn: str
    creation_time: AwsTimestamp
    optimization_job_status: str
    optimization_start_time: AwsTimestamp | None = None
    optimization_end_time: AwsTimestamp | None = None
    last_modified_time: AwsTimestamp | None = None
    deployment_instance_type: str
    max_instance_count: int | None = None
    optimization_types: list[str]


class ListOptimizationJobsResponse(AwsShape):
    optimization_job_summaries: list[OptimizationJobSummary]
    next_token: str | None = None


class StopOptimizationJobRequest(AwsRequest):
    aws_shape: ClassVar[str] = "StopOptimizationJobRequest"

    optimization_job_name: str


class DeleteOptimizationJobRequest(AwsRequest):
    aws_shape: ClassVar[str] = "DeleteOptimizationJobRequest"

    optimization_job_name: str
