"""AWS handlers for Create/Describe/List/Update/DeleteEndpoint: parse, call, shape."""

from __future__ import annotations

from api.operations.registry import OperationContext, aws_operation
from api.responses.endpoints import describe_endpoint, summarize_endpoint
from core.sagemaker.shapes.endpoints import (
    CreateEndpointInput,
    CreateEndpointOutput,
    DeleteEndpointInput,
    DescribeEndpointInput,
    DescribeEndpointOutput,
    ListEndpointsInput,
    ListEndpointsOutput,
    UpdateEndpointInput,
    UpdateEndpointOutput,
)
from core.services import endpoints as service
from db.queries.endpoint_instance import list_endpoint_instances


@aws_operation("CreateEndpoint", CreateEndpointInput)
def create_endpoint(context: OperationContext, request: CreateEndpointInput) -> CreateEndpointOutput:
    endpoint = service.create_endpoint(
        context.unit, principal=context.principal, dispatcher=context.dispatcher, request=request
    )
    return CreateEndpointOutput(endpoint_arn=endpoint.arn)


@aws_operation("DescribeEndpoint", DescribeEndpointInput, read_only=True)
def describe_endpoint_operation(
    context: OperationContext, request: DescribeEndpointInput
) -> DescribeEndpointOutput:
    endpoint = service.get_endpoint(context.session, principal=context.principal, name=request.endpoint_name)
    instances = list_endpoint_instances(context.session, endpoint_id=endpoint.id)
    return describe_endpoint(endpoint, instances)


@aws_operation("ListEndpoints", ListEndpointsInput, read_only=True)
def list_endpoints(context: OperationContext, request: ListEndpointsInput) -> ListEndpointsOutput:
    page = service.list_endpoints(context.session, principal=context.principal, request=request)
    return ListEndpointsOutput(
        endpoints=[summarize_endpoint(endpoint) for endpoint in page.endpoints], next_token=page.next_token
    )


@aws_operation("UpdateEndpoint", UpdateEndpointInput)
def update_endpoint(context: OperationContext, request: UpdateEndpointInput) -> UpdateEndpointOutput:
    endpoint = service.update_endpoint(context.session, principal=context.principal, request=request)
    return UpdateEndpointOutput(endpoint_arn=endpoint.arn)


@aws_operation("DeleteEndpoint", DeleteEndpointInput)
def delete_endpoint(context: OperationContext, request: DeleteEndpointInput) -> None:
    service.delete_endpoint(context.session, principal=context.principal, name=request.endpoint_name)
