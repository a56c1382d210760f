"""Helpers the REST routers share."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import Depends
from pydantic import ValidationError

from api.deps import PrincipalDep, ReadSessionDep
from core.sagemaker.errors import aws_error_from_pydantic
from core.sagemaker.shapes.base import AwsRequest, AwsShape
from core.sagemaker.shapes.optimization_jobs import DescribeOptimizationJobRequest
from core.services import optimization_jobs
from db.models.optimization_job import OptimizationJob

RequestT = TypeVar("RequestT", bound=AwsRequest)


class EmptyResponse(AwsShape):
    """``{}``, what AWS returns for Stop/Delete."""


def build_request(model: type[RequestT], members: dict[str, Any]) -> RequestT:
    """Validate path/query values exactly as the AWS route validates a JSON body."""
    present = {name: value for name, value in members.items() if value is not None}
    try:
        return model.model_validate(present)
    except ValidationError as error:
        raise aws_error_from_pydantic(error.errors()) from None


def job_in_path(name: str, session: ReadSessionDep, principal: PrincipalDep) -> OptimizationJob:
    """The caller's job named by ``{name}``, the name checked as DescribeOptimizationJob checks it.

    Routes that also take ``ReadSessionDep`` get the same session (FastAPI caches it per request).
    """
    request = build_request(DescribeOptimizationJobRequest, {"OptimizationJobName": name})
    return optimization_jobs.get_job(session, principal=principal, name=request.optimization_job_name)


JobInPathDep = Annotated[OptimizationJob, Depends(job_in_path)]
