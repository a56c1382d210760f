"""AWS handlers for Create/Describe/List/DeleteEndpointConfig: parse, call, shape."""

from __future__ import annotations

from api.operations.registry import OperationContext, aws_operation
from api.responses.endpoint_configs import describe_endpoint_config as describe_config_shape
from api.responses.endpoint_configs import summarize_endpoint_config
from core.sagemaker.shapes.endpoint_configs import (
    CreateEndpointConfigInput,
    CreateEndpointConfigOutput,
    DeleteEndpointConfigInput,
    DescribeEndpointConfigInput,
    DescribeEndpointConfigOutput,
    ListEndpointConfigsInput,
    ListEndpointConfigsOutput,
)
from core.services import endpoint_configs as service


@aws_operation("CreateEndpointConfig", CreateEndpointConfigInput)
def create_endpoint_config(
    context: OperationContext, request: CreateEndpointConfigInput
) -> CreateEndpointConfigOutput:
    config = service.create_endpoint_config(
        context.session, principal=context.principal, settings=context.settings, request=request
    )
    return CreateEndpointConfigOutput(endpoint_config_arn=config.arn)


@aws_operation("DescribeEndpointConfig", DescribeEndpointConfigInput, read_only=True)
def describe_endpoint_config(
    context: OperationContext, request: DescribeEndpointConfigInput
) -> DescribeEndpointConfigOutput:
    config = service.get_endpoint_config(
        context.session, principal=context.principal, name=request.endpoint_config_name
    )
    return describe_config_shape(config)


@aws_operation("ListEndpointConfigs", ListEndpointConfigsInput, read_only=True)
def list_endpoint_configs(
    context: OperationContext, request: ListEndpointConfigsInput
) -> ListEndpointConfigsOutput:
    page = service.list_endpoint_configs(context.session, principal=context.principal, request=request)
    return ListEndpointConfigsOutput(
        endpoint_configs=[summarize_endpoint_config(config) for config in page.configs],
        next_token=page.next_token,
    )


@aws_operation("DeleteEndpointConfig", DeleteEndpointConfigInput)
def delete_endpoint_config(context: OperationContext, request: DeleteEndpointConfigInput) -> None:
    service.delete_endpoint_config(
        context.session, principal=context.principal, name=request.endpoint_config_name
    )
