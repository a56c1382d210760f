"""Endpoint configurations and endpoints: CreateEndpointConfig / CreateEndpoint request bodies."""

from __future__ import annotations

import uuid
from typing import Any


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def production_variant(model_name: str, **overrides: Any) -> dict[str, Any]:
    variant: dict[str, Any] = {
        "VariantName": "AllTraffic",
        "ModelName": model_name,
        "InstanceType": "ml.g5.xlarge",
        "InitialInstanceCount": 1,
    }
    variant.update(overrides)
    return variant


def create_endpoint_config_request(model_name: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "EndpointConfigName": unique_name("config"),
        "ProductionVariants": [production_variant(model_name)],
    }
    body.update(overrides)
    return body


def data_capture_config(destination: str, **overrides: Any) -> dict[str, Any]:
    capture: dict[str, Any] = {
        "EnableCapture": True,
        "InitialSamplingPercentage": 100,
        "DestinationS3Uri": destination,
        "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
    }
    capture.update(overrides)
    return capture
