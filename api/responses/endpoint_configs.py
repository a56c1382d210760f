"""EndpointConfig rows as DescribeEndpointConfig / ListEndpointConfigs shapes."""

from __future__ import annotations

from core.sagemaker.shapes.endpoint_configs import DescribeEndpointConfigOutput, EndpointConfigSummary
from db.models.endpoint_config import EndpointConfig


def describe_endpoint_config(config: EndpointConfig) -> DescribeEndpointConfigOutput:
    return DescribeEndpointConfigOutput.model_validate(
        {
            **config.spec,
            "EndpointConfigName": config.name,
            "EndpointConfigArn": config.arn,
            "CreationTime": config.created_at,
        }
    )


def summarize_endpoint_config(config: EndpointConfig) -> EndpointConfigSummary:
    return EndpointConfigSummary(
        endpoint_config_name=config.name, endpoint_config_arn=config.arn, creation_time=config.created_at
    )
