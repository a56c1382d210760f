"""AWS handlers for CreateModel, DescribeModel, ListModels and DeleteModel: parse, call, shape."""

from __future__ import annotations

from api.operations.registry import OperationContext, aws_operation
from api.responses.sagemaker_models import describe_sagemaker_model, summarize_sagemaker_model
from core.sagemaker.shapes.sagemaker_models import (
    CreateModelInput,
    CreateModelOutput,
    DeleteModelInput,
    DescribeModelInput,
    DescribeModelOutput,
    ListModelsInput,
    ListModelsOutput,
)
from core.services import sagemaker_models as service


@aws_operation("CreateModel", CreateModelInput)
def create_model(context: OperationContext, request: CreateModelInput) -> CreateModelOutput:
    model = service.create_model(context.session, principal=context.principal, request=request)
    return CreateModelOutput(model_arn=model.arn)


@aws_operation("DescribeModel", DescribeModelInput, read_only=True)
def describe_model(context: OperationContext, request: DescribeModelInput) -> DescribeModelOutput:
    model = service.get_model(context.session, principal=context.principal, name=request.model_name)
    return describe_sagemaker_model(model)


@aws_operation("ListModels", ListModelsInput, read_only=True)
def list_models(context: OperationContext, request: ListModelsInput) -> ListModelsOutput:
    page = service.list_models(context.session, principal=context.principal, request=request)
    return ListModelsOutput(
        models=[summarize_sagemaker_model(model) for model in page.models], next_token=page.next_token
    )


@aws_operation("DeleteModel", DeleteModelInput)
def delete_model(context: OperationContext, request: DeleteModelInput) -> None:
    service.delete_model(context.session, principal=context.principal, name=request.model_name)
