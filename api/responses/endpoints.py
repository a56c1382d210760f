"""Endpoint rows (and their instances) as DescribeEndpoint / ListEndpoints shapes."""

from __future__ import annotations

from typing import Any

from core.sagemaker.shapes.endpoints import (
    DataCaptureConfigSummary,
    DeploymentConfig,
    DescribeEndpointOutput,
    EndpointSummary,
    PendingDeploymentSummary,
    PendingProductionVariantSummary,
    ProductionVariantStatus,
    ProductionVariantSummary,
)
from db.models.endpoint import Endpoint
from db.models.endpoint_instance import EndpointInstance
from db.models.endpoint_status import EndpointStatus
from db.queries.endpoint_instance import IN_SERVICE


def _variant(spec: dict[str, Any]) -> dict[str, Any]:
    variant: dict[str, Any] = spec["ProductionVariants"][0]
    return variant


def _weight(variant: dict[str, Any]) -> float:
    return float(variant.get("InitialVariantWeight", 1.0))


def _variant_status(instances: list[EndpointInstance], desired: int) -> list[ProductionVariantStatus]:
    serving = sum(1 for instance in instances if instance.status == IN_SERVICE)
    if serving >= desired:
        return []
    started = min((instance.updated_at for instance in instances), default=None)
    messages = [instance.message for instance in instances if instance.message]
    return [
        ProductionVariantStatus(
            status="Creating",
            status_message=messages[-1] if messages else f"{serving} of {desired} instances serving",
            start_time=started,
        )
    ]


def _current_variant(endpoint: Endpoint, instances: list[EndpointInstance]) -> ProductionVariantSummary:
    variant = _variant(endpoint.config_spec)
    current = [instance for instance in instances if instance.generation == endpoint.generation]
    desired = int(variant["InitialInstanceCount"])
    return ProductionVariantSummary(
        variant_name=variant["VariantName"],
        current_weight=_weight(variant),
        desired_weight=_weight(variant),
        current_instance_count=sum(1 for instance in current if instance.status == IN_SERVICE),
        desired_instance_count=desired,
        variant_status=_variant_status(current, desired) or None,
    )


def _pending(endpoint: Endpoint, instances: list[EndpointInstance]) -> PendingDeploymentSummary | None:
    if endpoint.status is not EndpointStatus.UPDATING or endpoint.pending_config_spec is None:
        return None
    variant = _variant(endpoint.pending_config_spec)
    pending = [instance for instance in instances if instance.generation == endpoint.generation + 1]
    desired = int(variant["InitialInstanceCount"])
    return PendingDeploymentSummary(
        endpoint_config_name=endpoint.pending_config_name or "",
        production_variants=[
            PendingProductionVariantSummary(
                variant_name=variant["VariantName"],
                desired_weight=_weight(variant),
                current_instance_count=sum(1 for instance in pending if instance.status == IN_SERVICE),
                desired_instance_count=desired,
                instance_type=variant.get("InstanceType"),
                variant_status=_variant_status(pending, desired) or None,
            )
        ],
        start_time=endpoint.pending_since,
    )


def _capture(endpoint: Endpoint) -> DataCaptureConfigSummary | None:
    capture = endpoint.config_spec.get("DataCaptureConfig")
    if capture is None:
        return None
    enabled = bool(capture.get("EnableCapture", True))
    return DataCaptureConfigSummary(
        enable_capture=enabled,
        capture_status="Started" if enabled else "Stopped",
        current_sampling_percentage=int(capture["InitialSamplingPercentage"]),
        destination_s3_uri=capture["DestinationS3Uri"],
        kms_key_id=capture.get("KmsKeyId", ""),
    )


def describe_endpoint(endpoint: Endpoint, instances: list[EndpointInstance]) -> DescribeEndpointOutput:
    return DescribeEndpointOutput(
        endpoint_name=endpoint.name,
        endpoint_arn=endpoint.arn,
        endpoint_config_name=endpoint.config_name,
        production_variants=[_current_variant(endpoint, instances)],
        data_capture_config=_capture(endpoint),
        endpoint_status=endpoint.status.value,
        failure_reason=endpoint.failure_reason,
        creation_time=endpoint.created_at,
        last_modified_time=endpoint.last_modified_at,
        last_deployment_config=None
        if endpoint.deployment_config is None
        else DeploymentConfig.model_validate(endpoint.deployment_config),
        pending_deployment_summary=_pending(endpoint, instances),
    )


def summarize_endpoint(endpoint: Endpoint) -> EndpointSummary:
    return EndpointSummary(
        endpoint_name=endpoint.name,
        endpoint_arn=endpoint.arn,
        creation_time=endpoint.created_at,
        last_modified_time=endpoint.last_modified_at,
        endpoint_status=endpoint.status.value,
    )
