"""Shapes of CreateEndpoint, DescribeEndpoint, ListEndpoints, UpdateEndpoint and DeleteEndpoint."""

from __future__ import annotations

from typing import ClassVar

from core.sagemaker.shapes.base import AwsRequest, AwsShape, AwsTimestamp
from core.sagemaker.shapes.common import Tag
from core.sagemaker.shapes.endpoint_configs import (
    AcceleratorPartitionLayout,
    AsyncInferenceConfig,
    CrossRegionTrafficConfig,
    ExplainerConfig,
    MetricsConfig,
    ProductionVariantManagedInstanceScaling,
    ProductionVariantRoutingConfig,
    ProductionVariantServerlessConfig,
)
from core.sagemaker.shapes.listing import ListByStatusInput


class CapacitySize(AwsShape):
    type: str
    value: int


class TrafficRoutingConfig(AwsShape):
    type: str
    wait_interval_in_seconds: int
    canary_size: CapacitySize | None = None
    linear_step_size: CapacitySize | None = None


class BlueGreenUpdatePolicy(AwsShape):
    traffic_routing_configuration: TrafficRoutingConfig
    termination_wait_in_seconds: int | None = None
    maximum_execution_timeout_in_seconds: int | None = None


class RollingUpdatePolicy(AwsShape):
    maximum_batch_size: CapacitySize
    wait_interval_in_seconds: int
    maximum_execution_timeout_in_seconds: int | None = None
    rollback_maximum_batch_size: CapacitySize | None = None


class Alarm(AwsShape):
    alarm_name: str | None = None


class AutoRollbackConfig(AwsShape):
    alarms: list[Alarm] | None = None


class DeploymentConfig(AwsShape):
    blue_green_update_policy: BlueGreenUpdatePolicy | None = None
    rolling_update_policy: RollingUpdatePolicy | None = None
    auto_rollback_configuration: AutoRollbackConfig | None = None


class CreateEndpointInput(AwsRequest):
    aws_shape: ClassVar[str] = "CreateEndpointInput"

    endpoint_name: str
    endpoint_config_name: str
    deployment_config: DeploymentConfig | None = None
    tags: list[Tag] | None = None


class CreateEndpointOutput(AwsShape):
    endpoint_arn: str


class DescribeEndpointInput(AwsRequest):
    aws_shape: ClassVar[str] = "DescribeEndpointInput"

    endpoint_name: str


class DeployedImage(AwsShape):
    specified_image: str | None = None
    resolved_image: str | None = None
    resolution_time: AwsTimestamp | None = None


class InstancePoolSummary(AwsShape):
    instance_type: str
    current_instance_count: int


class ProductionVariantStatus(AwsShape):
    status: str
    status_message: str | None = None
    start_time: AwsTimestamp | None = None


class Ec2CapacityReservation(AwsShape):
    ec2_capacity_reservation_id: str | None = None
    total_instance_count: int | None = None
    available_instance_count: int | None = None
    used_by_current_endpoint: int | None = None


class ProductionVariantCapacityReservationSummary(AwsShape):
    ml_reservation_arn: str | None = None
    capacity_reservation_preference: str | None = None
    total_instance_count: int | None = None
    available_instance_count: int | None = None
    used_by_current_endpoint: int | None = None
    ec2_capacity_reservations: list[Ec2CapacityReservation] | None = None


class ProductionVariantSummary(AwsShape):
    variant_name: str
    deployed_images: list[DeployedImage] | None = None
    current_weight: float | None = None
    desired_weight: float | None = None
    current_instance_count: int | None = None
    desired_instance_count: int | None = None
    instance_pools: list[InstancePoolSummary] | None = None
    variant_status: list[ProductionVariantStatus] | None = None
    current_serverless_config: ProductionVariantServerlessConfig | None = None
    desired_serverless_config: ProductionVariantServerlessConfig | None = None
    managed_instance_scaling: ProductionVariantManagedInstanceScaling | None = None
    routing_config: ProductionVariantRoutingConfig | None = None
    capacity_reservation_config: ProductionVariantCapacityReservationSummary | None = None
    accelerator_partition_layouts: list[AcceleratorPartitionLayout] | None = None


class DataCaptureConfigSummary(AwsShape):
    enable_capture: bool
    capture_status: str
    current_sampling_percentage: int
    destination_s3_uri: str
    kms_key_id: str


class PendingProductionVariantSummary(AwsShape):
    variant_name: str
    deployed_images: list[DeployedImage] | None = None
    current_weight: float | None = None
    desired_weight: float | None = None
    current_instance_count: int | None = None
    desired_instance_count: int | None = None
    instance_type: str | None = None
    instance_pools: list[InstancePoolSummary] | None = None
    accelerator_type: str | None = None
    variant_status: list[ProductionVariantStatus] | None = None
    current_serverless_config: ProductionVariantServerlessConfig | None = None
    desired_serverless_config: ProductionVariantServerlessConfig | None = None
    managed_instance_scaling: ProductionVariantManagedInstanceScaling | None = None
    routing_config: ProductionVariantRoutingConfig | None = None
    accelerator_partition_layouts: list[AcceleratorPartitionLayout] | None = None


class PendingDeploymentSummary(AwsShape):
    endpoint_config_name: str
    production_variants: list[PendingProductionVariantSummary] | None = None
    start_time: AwsTimestamp | None = None
    shadow_production_variants: list[PendingProductionVariantSummary] | None = None


class DescribeEndpointOutput(AwsShape):
    endpoint_name: str
    endpoint_arn: str
    endpoint_config_name: str | None = None
    production_variants: list[ProductionVariantSummary] | None = None
    data_capture_config: DataCaptureConfigSummary | None = None
    endpoint_status: str
    failure_reason: str | None = None
    creation_time: AwsTimestamp
    last_modified_time: AwsTimestamp
    last_deployment_config: DeploymentConfig | None = None
    async_inference_config: AsyncInferenceConfig | None = None
    pending_deployment_summary: PendingDeploymentSummary | None = None
    explainer_config: ExplainerConfig | None = None
    shadow_production_variants: list[ProductionVariantSummary] | None = None
    metrics_config: MetricsConfig | None = None
    cross_region_traffic_config: CrossRegionTrafficConfig | None = None


class ListEndpointsInput(ListByStatusInput):
    aws_shape: ClassVar[str] = "ListEndpointsInput"


class EndpointSummary(AwsShape):
    endpoint_name: str
    endpoint_arn: str
    creation_time: AwsTimestamp
    last_modified_time: AwsTimestamp
    endpoint_status: str


class ListEndpointsOutput(AwsShape):
    endpoints: list[EndpointSummary]
    next_token: str | None = None


class VariantProperty(AwsShape):
    variant_property_type: str


class UpdateEndpointInput(AwsRequest):
    aws_shape: ClassVar[str] = "UpdateEndpointInput"

    endpoint_name: str
    endpoint_config_name: str
    retain_all_variant_properties: bool | None = None
    exclude_retained_variant_properties: list[VariantProperty] | None = None
    deployment_config: DeploymentConfig | None = None
    retain_deployment_config: bool | None = None


class UpdateEndpointOutput(AwsShape):
    endpoint_arn: str


class DeleteEndpointInput(AwsRequest):
    aws_shape: ClassVar[str] = "DeleteEndpointInput"

    endpoint_name: str
