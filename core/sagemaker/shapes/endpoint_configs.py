"""Shapes of CreateEndpointConfig, DescribeEndpointConfig, ListEndpointConfigs and DeleteEndpointConfig.

Every member botocore's model has is here, so Describe echoes a config exactly; the service
says which of them eaglenest serves (core/services/endpoint_configs.py).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from core.sagemaker.shapes.base import AwsRequest, AwsShape, AwsTimestamp
from core.sagemaker.shapes.common import Tag, VpcConfig
from core.sagemaker.shapes.listing import ListByNameInput


class InstancePool(AwsShape):
    instance_type: str
    model_name_override: str | None = None
    priority: int


class ProductionVariantCoreDumpConfig(AwsShape):
    destination_s3_uri: str
    kms_key_id: str | None = None


class ProductionVariantServerlessConfig(AwsShape):
    memory_size_in_mb: int = Field(alias="MemorySizeInMB")
    max_concurrency: int
    provisioned_concurrency: int | None = None


class ProductionVariantManagedInstanceScalingScaleInPolicy(AwsShape):
    strategy: str
    maximum_step_size: int | None = None
    cooldown_in_minutes: int | None = None


class ProductionVariantManagedInstanceScaling(AwsShape):
    status: str | None = None
    min_instance_count: int | None = None
    max_instance_count: int | None = None
    scale_in_policy: ProductionVariantManagedInstanceScalingScaleInPolicy | None = None


class PrefixAwareRoutingConfig(AwsShape):
    prefix_length: int | None = None
    concurrency_threshold: int | None = None


class ProductionVariantRoutingConfig(AwsShape):
    routing_strategy: str
    prefix_aware_routing_config: PrefixAwareRoutingConfig | None = None


class ProductionVariantCapacityReservationConfig(AwsShape):
    capacity_reservation_preference: str | None = None
    ml_reservation_arn: str | None = None


class AcceleratorPartitionLayout(AwsShape):
    accelerator_partition_types: list[str] | None = None


class ProductionVariant(AwsShape):
    variant_name: str
    model_name: str | None = None
    initial_instance_count: int | None = None
    instance_type: str | None = None
    instance_pools: list[InstancePool] | None = None
    variant_instance_provision_timeout_in_seconds: int | None = None
    initial_variant_weight: float | None = None
    accelerator_type: str | None = None
    core_dump_config: ProductionVariantCoreDumpConfig | None = None
    serverless_config: ProductionVariantServerlessConfig | None = None
    volume_size_in_gb: int | None = Field(default=None, alias="VolumeSizeInGB")
    model_data_download_timeout_in_seconds: int | None = None
    container_startup_health_check_timeout_in_seconds: int | None = None
    enable_ssm_access: bool | None = Field(default=None, alias="EnableSSMAccess")
    managed_instance_scaling: ProductionVariantManagedInstanceScaling | None = None
    routing_config: ProductionVariantRoutingConfig | None = None
    inference_ami_version: str | None = None
    capacity_reservation_config: ProductionVariantCapacityReservationConfig | None = None
    accelerator_partition_layouts: list[AcceleratorPartitionLayout] | None = None


class CaptureOption(AwsShape):
    capture_mode: str


class CaptureContentTypeHeader(AwsShape):
    csv_content_types: list[str] | None = None
    json_content_types: list[str] | None = None


class DataCaptureConfig(AwsShape):
    enable_capture: bool | None = None
    initial_sampling_percentage: int
    destination_s3_uri: str
    kms_key_id: str | None = None
    capture_options: list[CaptureOption]
    capture_content_type_header: CaptureContentTypeHeader | None = None


class AsyncInferenceClientConfig(AwsShape):
    max_concurrent_invocations_per_instance: int | None = None


class AsyncInferenceNotificationConfig(AwsShape):
    success_topic: str | None = None
    error_topic: str | None = None
    include_inference_response_in: list[str] | None = None


class AsyncInferenceOutputConfig(AwsShape):
    kms_key_id: str | None = None
    s3_output_path: str | None = None
    notification_config: AsyncInferenceNotificationConfig | None = None
    s3_failure_path: str | None = None


class AsyncInferenceConfig(AwsShape):
    client_config: AsyncInferenceClientConfig | None = None
    output_config: AsyncInferenceOutputConfig


class ClarifyInferenceConfig(AwsShape):
    features_attribute: str | None = None
    content_template: str | None = None
    max_record_count: int | None = None
    max_payload_in_mb: int | None = Field(default=None, alias="MaxPayloadInMB")
    probability_index: int | None = None
    label_index: int | None = None
    probability_attribute: str | None = None
    label_attribute: str | None = None
    label_headers: list[str] | None = None
    feature_headers: list[str] | None = None
    feature_types: list[str] | None = None


class ClarifyShapBaselineConfig(AwsShape):
    mime_type: str | None = None
    shap_baseline: str | None = None
    shap_baseline_uri: str | None = None


class ClarifyTextConfig(AwsShape):
    language: str
    granularity: str


class ClarifyShapConfig(AwsShape):
    shap_baseline_config: ClarifyShapBaselineConfig
    number_of_samples: int | None = None
    use_logit: bool | None = None
    seed: int | None = None
    text_config: ClarifyTextConfig | None = None


class ClarifyExplainerConfig(AwsShape):
    enable_explanations: str | None = None
    inference_config: ClarifyInferenceConfig | None = None
    shap_config: ClarifyShapConfig


class ExplainerConfig(AwsShape):
    clarify_explainer_config: ClarifyExplainerConfig | None = None


class MetricsConfig(AwsShape):
    enable_enhanced_metrics: bool | None = None
    enable_detailed_observability: bool | None = None
    metric_publish_frequency_in_seconds: int | None = None


class CrossRegionTrafficConfig(AwsShape):
    max_invocations_per_second_per_instance: int
    max_cross_region_percent_per_endpoint: int


class CreateEndpointConfigInput(AwsRequest):
    aws_shape: ClassVar[str] = "CreateEndpointConfigInput"

    endpoint_config_name: str
    production_variants: list[ProductionVariant]
    data_capture_config: DataCaptureConfig | None = None
    tags: list[Tag] | None = None
    kms_key_id: str | None = None
    async_inference_config: AsyncInferenceConfig | None = None
    explainer_config: ExplainerConfig | None = None
    shadow_production_variants: list[ProductionVariant] | None = None
    execution_role_arn: str | None = None
    vpc_config: VpcConfig | None = None
    enable_network_isolation: bool | None = None
    metrics_config: MetricsConfig | None = None
    cross_region_traffic_config: CrossRegionTrafficConfig | None = None


class CreateEndpointConfigOutput(AwsShape):
    endpoint_config_arn: str


class DescribeEndpointConfigInput(AwsRequest):
    aws_shape: ClassVar[str] = "DescribeEndpointConfigInput"

    endpoint_config_name: str


class DescribeEndpointConfigOutput(AwsShape):
    endpoint_config_name: str
    endpoint_config_arn: str
    production_variants: list[ProductionVariant]
    data_capture_config: DataCaptureConfig | None = None
    kms_key_id: str | None = None
    creation_time: AwsTimestamp
    async_inference_config: AsyncInferenceConfig | None = None
    explainer_config: ExplainerConfig | None = None
    shadow_production_variants: list[ProductionVariant] | None = None
    execution_role_arn: str | None = None
    vpc_config: VpcConfig | None = None
    enable_network_isolation: bool | None = None
    metrics_config: MetricsConfig | None = None
    cross_region_traffic_config: CrossRegionTrafficConfig | None = None


class ListEndpointConfigsInput(ListByNameInput):
    aws_shape: ClassVar[str] = "ListEndpointConfigsInput"


class EndpointConfigSummary(AwsShape):
    endpoint_config_name: str
    endpoint_config_arn: str
    creation_time: AwsTimestamp


class ListEndpointConfigsOutput(AwsShape):
    endpoint_configs: list[EndpointConfigSummary]
    next_token: str | None = None


class DeleteEndpointConfigInput(AwsRequest):
    aws_shape: ClassVar[str] = "DeleteEndpointConfigInput"

    endpoint_config_name: str
