"""Shapes of CreateModel, DescribeModel, ListModels and DeleteModel."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from core.sagemaker.shapes.base import AwsRequest, AwsShape, AwsTimestamp
from core.sagemaker.shapes.common import Tag, VpcConfig
from core.sagemaker.shapes.listing import ListByNameInput


class ModelAccessConfig(AwsShape):
    accept_eula: bool


class InferenceHubAccessConfig(AwsShape):
    hub_content_arn: str


class S3ModelDataSource(AwsShape):
    s3_uri: str
    s3_data_type: str
    compression_type: str
    model_access_config: ModelAccessConfig | None = None
    hub_access_config: InferenceHubAccessConfig | None = None
    manifest_s3_uri: str | None = None
    e_tag: str | None = None
    manifest_etag: str | None = None


class ModelDataSource(AwsShape):
    s3_data_source: S3ModelDataSource | None = None


class AdditionalModelDataSource(AwsShape):
    """An extra channel; ``eagle_model`` carries an existing EAGLE head to start from."""

    channel_name: str
    s3_data_source: S3ModelDataSource


class RepositoryAuthConfig(AwsShape):
    repository_credentials_provider_arn: str


class ImageConfig(AwsShape):
    repository_access_mode: str
    repository_auth_config: RepositoryAuthConfig | None = None


class MultiModelConfig(AwsShape):
    model_cache_setting: str | None = None


class MetricsEndpoint(AwsShape):
    metrics_endpoint_path: str
    metric_publish_frequency_in_seconds: int | None = None


class ContainerMetricsConfig(AwsShape):
    metrics_endpoints: list[MetricsEndpoint] | None = None


class ContainerDefinition(AwsShape):
    container_hostname: str | None = None
    image: str | None = None
    image_config: ImageConfig | None = None
    mode: str | None = None
    model_data_url: str | None = None
    model_data_source: ModelDataSource | None = None
    additional_model_data_sources: list[AdditionalModelDataSource] | None = None
    environment: dict[str, str] | None = None
    model_package_name: str | None = None
    inference_specification_name: str | None = None
    multi_model_config: MultiModelConfig | None = None
    container_metrics_config: ContainerMetricsConfig | None = None


class InferenceExecutionConfig(AwsShape):
    mode: str


class RealTimeInferenceRecommendation(AwsShape):
    recommendation_id: str
    instance_type: str
    environment: dict[str, str] | None = None


class DeploymentRecommendation(AwsShape):
    recommendation_status: str
    real_time_inference_recommendations: list[RealTimeInferenceRecommendation] | None = None


class CreateModelInput(AwsRequest):
    aws_shape: ClassVar[str] = "CreateModelInput"

    model_name: str
    primary_container: ContainerDefinition | None = None
    containers: list[ContainerDefinition] | None = None
    inference_execution_config: InferenceExecutionConfig | None = None
    execution_role_arn: str | None = None
    tags: list[Tag] | None = None
    vpc_config: VpcConfig | None = None
    enable_network_isolation: bool | None = None


class CreateModelOutput(AwsShape):
    model_arn: str


class DescribeModelInput(AwsRequest):
    aws_shape: ClassVar[str] = "DescribeModelInput"

    model_name: str


class DescribeModelOutput(AwsShape):
    model_name: str
    primary_container: ContainerDefinition | None = None
    containers: list[ContainerDefinition] | None = None
    inference_execution_config: InferenceExecutionConfig | None = None
    execution_role_arn: str | None = None
    vpc_config: VpcConfig | None = None
    creation_time: AwsTimestamp
    model_arn: str
    enable_network_isolation: bool | None = None
    deployment_recommendation: DeploymentRecommendation | None = None


class ModelDetail(DescribeModelOutput):
    """REST describe: DescribeModel's body plus the model's tags."""

    tags: list[Tag] = Field(default_factory=list)


class ListModelsInput(ListByNameInput):
    aws_shape: ClassVar[str] = "ListModelsInput"


class ModelSummary(AwsShape):
    model_name: str
    model_arn: str
    creation_time: AwsTimestamp


class ListModelsOutput(AwsShape):
    models: list[ModelSummary]
    next_token: str | None = None


class DeleteModelInput(AwsRequest):
    aws_shape: ClassVar[str] = "DeleteModelInput"

    model_name: str
