"""/dashboard/api/endpoints: the endpoints page (status, instances, live throughput and acceptance)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from api.dashboard.shapes import (
    DashboardEndpoint,
    DashboardEndpointInstance,
    DashboardEndpointList,
    DashboardEndpointLive,
)
from api.deps import ApiStateDep, PrincipalDep
from api.error_responses import error_responses
from api.responses.endpoints import describe_endpoint
from api.rest.common import build_request
from api.runtime.instance_stats import EndpointStats
from api.state import ApiState
from core.principal import Principal
from core.sagemaker.errors import ValidationException
from core.sagemaker.shapes.endpoints import ListEndpointsInput
from core.services import endpoints as service
from db.queries.endpoint_instance import list_endpoint_instances

router = APIRouter(prefix="/dashboard/api/endpoints", tags=["dashboard"])


def _endpoints(
    state: ApiState, principal: Principal, request: ListEndpointsInput
) -> tuple[list[DashboardEndpoint], str | None]:
    with state.read_session_factory() as session:
        page = service.list_endpoints(session, principal=principal, request=request)
        rows = []
        for endpoint in page.endpoints:
            instances = list_endpoint_instances(session, endpoint_id=endpoint.id)
            rows.append(
                DashboardEndpoint(
                    endpoint=describe_endpoint(endpoint, instances),
                    instances=[
                        DashboardEndpointInstance(
                            generation=instance.generation,
                            ordinal=instance.ordinal,
                            status=instance.status,
                            restarts=instance.restarts,
                            message=instance.message,
                        )
                        for instance in instances
                    ],
                    live=DashboardEndpointLive(instances_answering=0, requests_running=0, generated_tokens=0),
                )
            )
        return rows, page.next_token


@router.get(
    "",
    summary="ListEndpoints with each endpoint described, its instances and live numbers from them",
    response_model=DashboardEndpointList,
    responses=error_responses(ValidationException),
    response_model_exclude_none=True,
)
async def list_dashboard_endpoints(
    *,
    state: ApiStateDep,
    principal: PrincipalDep,
    next_token: Annotated[str | None, Query(alias="NextToken")] = None,
    max_results: Annotated[int | None, Query(alias="MaxResults")] = None,
    name_contains: Annotated[str | None, Query(alias="NameContains")] = None,
) -> DashboardEndpointList:
    request = build_request(
        ListEndpointsInput,
        {"NextToken": next_token, "MaxResults": max_results, "NameContains": name_contains},
    )
    rows, token = await run_in_threadpool(_endpoints, state, principal, request)
    stats = await state.runtime.instance_stats(account_id=principal.account_id)
    for row in rows:
        live = stats.get(row.endpoint.endpoint_arn, EndpointStats())
        row.live = DashboardEndpointLive(
            instances_answering=live.answering,
            requests_running=live.running,
            generated_tokens=live.generated_tokens,
            acceptance_length=live.acceptance_length,
        )
    return DashboardEndpointList(endpoints=rows, next_token=token)
