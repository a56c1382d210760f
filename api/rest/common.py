"""Helpers the REST routers share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from pydantic import ValidationError

from api.deps import PrincipalDep, ReadSessionDep
from api.json_body import parse_json_body
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


def signed_json_body(model: type[RequestT]) -> Callable[..., Awaitable[RequestT]]:
    """A dependency: the body as ``model``, parsed only after the signature has been checked.

    A declared pydantic body parameter would make FastAPI parse and validate the body
    before any dependency runs, so an unsigned request would learn about its JSON and an
    unsigned megabyte would be parsed. This parses it the way ``POST /`` does, with the
    same errors. The route documents the body with ``json_body_openapi(model)``.
    """

    async def parse(request: Request, _principal: PrincipalDep) -> RequestT:
        document = parse_json_body(await request.body())
        try:
            return model.model_validate(document)
        except ValidationError as error:
            raise aws_error_from_pydantic(error.errors()) from None

    return parse


def json_body_openapi(model: type[AwsRequest]) -> dict[str, Any]:
    """``openapi_extra`` for a route whose body ``signed_json_body(model)`` parses.

    Registers ``model`` in BODY_MODELS, whose schemas api/openapi.py adds to the components.
    """
    BODY_MODELS.append(model)
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


BODY_MODELS: list[type[AwsRequest]] = []


def job_in_path(name: str, session: ReadSessionDep, principal: PrincipalDep) -> OptimizationJob:
    """The caller's job named by ``{name}``, the name checked as DescribeOptimizationJob checks it.

    Routes that also take ``ReadSessionDep`` get the same session (FastAPI caches it per request).
    """
    request = build_request(DescribeOptimizationJobRequest, {"OptimizationJobName": name})
    return optimization_jobs.get_job(session, principal=principal, name=request.optimization_job_name)


JobInPathDep = Annotated[OptimizationJob, Depends(job_in_path)]
