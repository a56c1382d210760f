"""/v1/optimization-jobs: list, create, describe (with progress and history), stop, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from api.deps import DispatcherDep, PrincipalDep, ReadSessionDep, SettingsDep, TransactionDep
from api.error_responses import error_responses
from api.responses.optimization_jobs import optimization_job_detail, summarize_optimization_job
from api.rest.common import EmptyResponse, JobInPathDep, build_request, json_body_openapi, signed_json_body
from core.sagemaker.errors import (
    ResourceInUse,
    ResourceLimitExceeded,
    ResourceNotFound,
    SerializationException,
    ValidationException,
)
from core.sagemaker.shapes.optimization_jobs import (
    CreateOptimizationJobRequest,
    CreateOptimizationJobResponse,
    DeleteOptimizationJobRequest,
    ListOptimizationJobsRequest,
    ListOptimizationJobsResponse,
    OptimizationJobDetail,
    StopOptimizationJobRequest,
)
from core.services import optimization_jobs as service
from db.types import utc_now

router = APIRouter(prefix="/v1/optimization-jobs", tags=["optimization-jobs"])


@router.get(
    "",
    summary="ListOptimizationJobs",
    response_model=ListOptimizationJobsResponse,
    responses=error_responses(ValidationException),
    response_model_exclude_none=True,
)
def list_optimization_jobs(
    *,
    session: ReadSessionDep,
    principal: PrincipalDep,
    next_token: Annotated[str | None, Query(alias="NextToken")] = None,
    max_results: Annotated[int | None, Query(alias="MaxResults")] = None,
    creation_time_after: Annotated[str | None, Query(alias="CreationTimeAfter")] = None,
    creation_time_before: Annotated[str | None, Query(alias="CreationTimeBefore")] = None,
    last_modified_time_after: Annotated[str | None, Query(alias="LastModifiedTimeAfter")] = None,
    last_modified_time_before: Annotated[str | None, Query(alias="LastModifiedTimeBefore")] = None,
    optimization_contains: Annotated[str | None, Query(alias="OptimizationContains")] = None,
    name_contains: Annotated[str | None, Query(alias="NameContains")] = None,
    status_equals: Annotated[str | None, Query(alias="StatusEquals")] = None,
    sort_by: Annotated[str | None, Query(alias="SortBy")] = None,
    sort_order: Annotated[str | None, Query(alias="SortOrder")] = None,
) -> ListOptimizationJobsResponse:
    """Timestamps are epoch seconds or ISO-8601; the body equals `aws sagemaker list-optimization-jobs`."""
    request = build_request(
        ListOptimizationJobsRequest,
        {
            "NextToken": next_token,
            "MaxResults": max_results,
            "CreationTimeAfter": creation_time_after,
            "CreationTimeBefore": creation_time_before,
            "LastModifiedTimeAfter": last_modified_time_after,
            "LastModifiedTimeBefore": last_modified_time_before,
            "OptimizationContains": optimization_contains,
            "NameContains": name_contains,
            "StatusEquals": status_equals,
            "SortBy": sort_by,
            "SortOrder": sort_order,
        },
    )
    page = service.list_jobs(session, principal=principal, request=request)
    return ListOptimizationJobsResponse(
        optimization_job_summaries=[summarize_optimization_job(job) for job in page.jobs],
        next_token=page.next_token,
    )


@router.post(
    "",
    summary="CreateOptimizationJob",
    response_model=CreateOptimizationJobResponse,
    responses=error_responses(
        ValidationException, SerializationException, ResourceInUse, ResourceLimitExceeded
    ),
    response_model_exclude_none=True,
    openapi_extra=json_body_openapi(CreateOptimizationJobRequest),
)
def create_optimization_job(
    request: Annotated[CreateOptimizationJobRequest, Depends(signed_json_body(CreateOptimizationJobRequest))],
    transaction: TransactionDep,
    principal: PrincipalDep,
    dispatcher: DispatcherDep,
    settings: SettingsDep,
) -> CreateOptimizationJobResponse:
    """The body is CreateOptimizationJob's JSON request, exactly as the AWS CLI sends it."""
    with transaction() as unit:
        job = service.create_job(
            unit,
            principal=principal,
            request=request,
            dispatcher=dispatcher,
            max_active_jobs=settings.max_active_optimization_jobs,
        )
    return CreateOptimizationJobResponse(optimization_job_arn=job.arn)


@router.get(
    "/{name}",
    summary="DescribeOptimizationJob, plus stage, progress, ETA, history and tags",
    response_model=OptimizationJobDetail,
    responses=error_responses(ValidationException, ResourceNotFound),
    response_model_exclude_none=True,
)
def describe_optimization_job(job: JobInPathDep, session: ReadSessionDep) -> OptimizationJobDetail:
    events, tags = service.get_job_history(session, job=job)
    return optimization_job_detail(job, events=events, tags=tags, now=utc_now())


@router.post(
    "/{name}/stop",
    summary="StopOptimizationJob",
    response_model=EmptyResponse,
    responses=error_responses(ValidationException, ResourceNotFound),
)
def stop_optimization_job(
    name: str, transaction: TransactionDep, principal: PrincipalDep, dispatcher: DispatcherDep
) -> EmptyResponse:
    request = build_request(StopOptimizationJobRequest, {"OptimizationJobName": name})
    with transaction() as unit:
        service.stop_job(unit, principal=principal, name=request.optimization_job_name, dispatcher=dispatcher)
    return EmptyResponse()


@router.delete(
    "/{name}",
    summary="DeleteOptimizationJob",
    response_model=EmptyResponse,
    responses=error_responses(ValidationException, ResourceNotFound),
)
def delete_optimization_job(name: str, transaction: TransactionDep, principal: PrincipalDep) -> EmptyResponse:
    request = build_request(DeleteOptimizationJobRequest, {"OptimizationJobName": name})
    with transaction() as unit:
        service.delete_job(unit.session, principal=principal, name=request.optimization_job_name)
    return EmptyResponse()
