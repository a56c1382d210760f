"""/dashboard/api/models: the models page (each model's containers, data sources and channels)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.dashboard.shapes import DashboardModelList
from api.deps import PrincipalDep, ReadSessionDep
from api.error_responses import error_responses
from api.responses.sagemaker_models import describe_sagemaker_model
from api.rest.common import build_request
from core.sagemaker.errors import ValidationException
from core.sagemaker.shapes.sagemaker_models import ListModelsInput
from core.services import sagemaker_models as service

router = APIRouter(prefix="/dashboard/api/models", tags=["dashboard"])


@router.get(
    "",
    summary="ListModels with each model described (data sources and the eagle_model channel)",
    response_model=DashboardModelList,
    responses=error_responses(ValidationException),
    response_model_exclude_none=True,
)
def list_dashboard_models(
    *,
    session: ReadSessionDep,
    principal: PrincipalDep,
    next_token: Annotated[str | None, Query(alias="NextToken")] = None,
    max_results: Annotated[int | None, Query(alias="MaxResults")] = None,
    name_contains: Annotated[str | None, Query(alias="NameContains")] = None,
) -> DashboardModelList:
    request = build_request(
        ListModelsInput,
        {"NextToken": next_token, "MaxResults": max_results, "NameContains": name_contains},
    )
    page = service.list_models(session, principal=principal, request=request)
    return DashboardModelList(
        models=[describe_sagemaker_model(model) for model in page.models], next_token=page.next_token
    )
