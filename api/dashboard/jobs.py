"""/dashboard/api/jobs: the jobs table, a job's training curve and its published results.

A job's request, status history, Stop and Delete go through /v1/optimization-jobs; these
routes add what that face does not give. All of them are SigV4-signed and per account.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.dashboard.job_rows import dashboard_job
from api.dashboard.published_results import read_job_results
from api.dashboard.shapes import DashboardJobList, JobResults, TrainingCurve, TrainingPointShape
from api.deps import PrincipalDep, ReadSessionDep, SettingsDep
from api.error_responses import error_responses
from api.rest.common import JobInPathDep, build_request
from core.sagemaker.errors import ResourceNotFound, ValidationException
from core.sagemaker.shapes.optimization_jobs import ListOptimizationJobsRequest
from core.services import optimization_jobs as service
from db.queries.role import get_role_credentials
from db.queries.training_point import list_training_points
from db.types import utc_now

router = APIRouter(prefix="/dashboard/api/jobs", tags=["dashboard"])

# Enough for a smooth curve; a long job's thousands of steps are thinned to this many.
MAX_CURVE_POINTS = 400


@router.get(
    "",
    summary="The jobs table: ListOptimizationJobs plus stage, progress, ETA, model and technique",
    response_model=DashboardJobList,
    responses=error_responses(ValidationException),
    response_model_exclude_none=True,
)
def list_dashboard_jobs(
    *,
    session: ReadSessionDep,
    principal: PrincipalDep,
    next_token: Annotated[str | None, Query(alias="NextToken")] = None,
    max_results: Annotated[int | None, Query(alias="MaxResults")] = None,
    name_contains: Annotated[str | None, Query(alias="NameContains")] = None,
    status_equals: Annotated[str | None, Query(alias="StatusEquals")] = None,
    sort_by: Annotated[str | None, Query(alias="SortBy")] = None,
    sort_order: Annotated[str | None, Query(alias="SortOrder")] = None,
) -> DashboardJobList:
    """Filters, sort and pages exactly as ListOptimizationJobs (same validation, same NextToken)."""
    request = build_request(
        ListOptimizationJobsRequest,
        {
            "NextToken": next_token,
            "MaxResults": max_results,
            "NameContains": name_contains,
            "StatusEquals": status_equals,
            "SortBy": sort_by,
            "SortOrder": sort_order,
        },
    )
    page = service.list_jobs(session, principal=principal, request=request, summaries_only=False)
    now = utc_now()
    return DashboardJobList(
        jobs=[dashboard_job(job, now=now) for job in page.jobs], next_token=page.next_token
    )


@router.get(
    "/{name}/training",
    summary="The job's training curve: loss and draft accuracy by position, per step",
    response_model=TrainingCurve,
    responses=error_responses(ValidationException, ResourceNotFound),
    response_model_exclude_none=True,
)
def get_training_curve(job: JobInPathDep, session: ReadSessionDep) -> TrainingCurve:
    points = list_training_points(session, job_id=job.id, max_points=MAX_CURVE_POINTS)
    return TrainingCurve(
        points=[
            TrainingPointShape(
                step=point.step,
                total_steps=point.total_steps,
                elapsed_seconds=point.elapsed_seconds,
                loss=point.loss,
                step_accuracy=point.step_accuracy,
            )
            for point in points
        ]
    )


@router.get(
    "/{name}/results",
    summary="The job's published benchmark table and artifacts, read from S3OutputLocation",
    response_model=JobResults,
    responses=error_responses(ValidationException, ResourceNotFound),
    response_model_exclude_none=True,
)
def get_job_results(
    job: JobInPathDep, principal: PrincipalDep, session: ReadSessionDep, settings: SettingsDep
) -> JobResults:
    # Read as the job's role, as the job wrote them; never with the service's own S3 identity.
    role = get_role_credentials(
        session, account_id=job.account_id, aws_account_id=principal.aws_account_id, arn=job.role_arn
    )
    return read_job_results(job, settings=settings, role=role)
