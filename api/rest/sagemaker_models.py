"""/v1/models: list, create, describe (with tags), delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from api.deps import PrincipalDep, ReadSessionDep, TransactionDep
from api.error_responses import error_responses
from api.responses.sagemaker_models import sagemaker_model_detail, summarize_sagemaker_model
from api.rest.common import EmptyResponse, build_request, json_body_openapi, signed_json_body
from core.sagemaker.errors import SerializationException, ValidationException
from core.sagemaker.shapes.sagemaker_models import (
    CreateModelInput,
    CreateModelOutput,
    DeleteModelInput,
    DescribeModelInput,
    ListModelsInput,
    ListModelsOutput,
    ModelDetail,
)
from core.services import sagemaker_models as service

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.get(
    "",
    summary="ListModels",
    response_model=ListModelsOutput,
    responses=error_responses(ValidationException),
    response_model_exclude_none=True,
)
def list_models(
    *,
    session: ReadSessionDep,
    principal: PrincipalDep,
    sort_by: Annotated[str | None, Query(alias="SortBy")] = None,
    sort_order: Annotated[str | None, Query(alias="SortOrder")] = None,
    next_token: Annotated[str | None, Query(alias="NextToken")] = None,
    max_results: Annotated[int | None, Query(alias="MaxResults")] = None,
    name_contains: Annotated[str | None, Query(alias="NameContains")] = None,
    creation_time_before: Annotated[str | None, Query(alias="CreationTimeBefore")] = None,
    creation_time_after: Annotated[str | None, Query(alias="CreationTimeAfter")] = None,
) -> ListModelsOutput:
    """Timestamps are epoch seconds or ISO-8601; the body equals `aws sagemaker list-models`."""
    request = build_request(
        ListModelsInput,
        {
            "SortBy": sort_by,
            "SortOrder": sort_order,
            "NextToken": next_token,
            "MaxResults": max_results,
            "NameContains": name_contains,
            "CreationTimeBefore": creation_time_before,
            "CreationTimeAfter": creation_time_after,
        },
    )
    page = service.list_models(session, principal=principal, request=request)
    return ListModelsOutput(
        models=[summarize_sagemaker_model(model) for model in page.models], next_token=page.next_token
    )


@router.post(
    "",
    summary="CreateModel",
    response_model=CreateModelOutput,
    responses=error_responses(ValidationException, SerializationException),
    response_model_exclude_none=True,
    openapi_extra=json_body_openapi(CreateModelInput),
)
def create_model(
    request: Annotated[CreateModelInput, Depends(signed_json_body(CreateModelInput))],
    transaction: TransactionDep,
    principal: PrincipalDep,
) -> CreateModelOutput:
    """The body is CreateModel's JSON request, exactly as the AWS CLI sends it."""
    with transaction() as unit:
        model = service.create_model(unit.session, principal=principal, request=request)
    return CreateModelOutput(model_arn=model.arn)


@router.get(
    "/{name}",
    summary="DescribeModel, plus the model's tags",
    response_model=ModelDetail,
    responses=error_responses(ValidationException),
    response_model_exclude_none=True,
)
def describe_model(name: str, session: ReadSessionDep, principal: PrincipalDep) -> ModelDetail:
    request = build_request(DescribeModelInput, {"ModelName": name})
    model = service.get_model(session, principal=principal, name=request.model_name)
    return sagemaker_model_detail(model, service.get_model_tags(session, model=model))


@router.delete(
    "/{name}",
    summary="DeleteModel",
    response_model=EmptyResponse,
    responses=error_responses(ValidationException),
)
def delete_model(name: str, transaction: TransactionDep, principal: PrincipalDep) -> EmptyResponse:
    request = build_request(DeleteModelInput, {"ModelName": name})
    with transaction() as unit:
        service.delete_model(unit.session, principal=principal, name=request.model_name)
    return EmptyResponse()
