"""AWS handlers for Create/Describe/List/Stop/DeleteOptimizationJob: parse, call, shape."""

from __future__ import annotations

from api.operations.registry import OperationContext, aws_operation
from api.responses.optimization_jobs import describe_optimization_job, summarize_optimization_job
from core.sagemaker.shapes.optimization_jobs import (
    CreateOptimizationJobRequest,
    CreateOptimizationJobResponse,
    DeleteOptimizationJobRequest,
    DescribeOptimizationJobRequest,
    DescribeOptimizationJobResponse,
    ListOptimizationJobsRequest,
    ListOptimizationJobsResponse,
    StopOptimizationJobRequest,
)
from core.services import optimization_jobs as service


@aws_operation("CreateOptimizationJob", CreateOptimizationJobRequest)
def create_optimization_job(
    context: OperationContext, request: CreateOptimizationJobRequest
) -> CreateOptimizationJobResponse:
    job = service.create_job(
        context.unit,
        principal=context.principal,
        request=request,
        dispatcher=context.dispatcher,
        max_active_jobs=context.settings.max_active_optimization_jobs,
    )
    return CreateOptimizationJobResponse(optimization_job_arn=job.arn)


@aws_operation("DescribeOptimizationJob", DescribeOptimizationJobRequest, read_only=True)
def describe_optimization_job_handler(
    context: OperationContext, request: DescribeOptimizationJobRequest
) -> DescribeOptimizationJobResponse:
    job = service.get_job(context.session, principal=context.principal, name=request.optimization_job_name)
    return describe_optimization_job(job)


@aws_operation("ListOptimizationJobs", ListOptimizationJobsRequest, read_only=True)
def list_optimization_jobs(
    context: OperationContext, request: ListOptimizationJobsRequest
) -> ListOptimizationJobsResponse:
    page = service.list_jobs(context.session, principal=context.principal, request=request)
    return ListOptimizationJobsResponse(
        optimization_job_summaries=[summarize_optimization_job(job) for job in page.jobs],
        next_token=page.next_token,
    )


@aws_operation("StopOptimizationJob", StopOptimizationJobRequest)
def stop_optimization_job(context: OperationContext, request: StopOptimizationJobRequest) -> None:
    service.stop_job(
        context.unit,
        principal=context.principal,
        name=request.optimization_job_name,
        dispatcher=context.dispatcher,
    )


@aws_operation("DeleteOptimizationJob", DeleteOptimizationJobRequest)
def delete_optimization_job(context: OperationContext, request: DeleteOptimizationJobRequest) -> None:
    service.delete_job(context.session, principal=context.principal, name=request.optimization_job_name)
