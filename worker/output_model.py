"""OutputConfig.SageMakerModel: the deployable model a finished job registers.

It is the source model's PrimaryContainer with the new head as its ``eagle_model`` channel,
created through the api's own CreateModel service (same checks, same rows, same ARN),
on behalf of the job's account.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from core.job_errors import JobFailedError
from core.job_spec import JobSpec
from core.model_source import EAGLE_MODEL_CHANNEL, is_archive_uri
from core.principal import Principal
from core.s3 import S3Location
from core.sagemaker.errors import AwsError
from core.sagemaker.shapes.sagemaker_models import (
    AdditionalModelDataSource,
    ContainerDefinition,
    CreateModelInput,
    ModelDataSource,
    S3ModelDataSource,
)
from core.services.sagemaker_models import create_model
from db.queries.sagemaker_model import get_sagemaker_model_by_name


@dataclass(frozen=True)
class OutputModel:
    name: str
    arn: str


def s3_prefix_source(uri: str) -> S3ModelDataSource:
    return S3ModelDataSource(s3_uri=uri, s3_data_type="S3Prefix", compression_type="None")


def output_model_request(
    job: JobSpec, *, name: str, base_model: S3Location, head_uri: str, image: str
) -> dict[str, Any]:
    """CreateModel's body: the source container (or one for the S3 model) plus the new head."""
    # ModelSource.S3 naming a model.tar.gz: the model serves from that archive, as SageMaker reads it.
    model_data = (
        S3ModelDataSource(s3_uri=base_model.uri, s3_data_type="S3Object", compression_type="Gzip")
        if is_archive_uri(base_model.uri)
        else s3_prefix_source(base_model.uri)
    )
    container = job.source_model_container or ContainerDefinition(
        image=image, model_data_source=ModelDataSource(s3_data_source=model_data)
    )
    channels = [
        source
        for source in container.additional_model_data_sources or []
        if source.channel_name != EAGLE_MODEL_CHANNEL
    ]
    head = AdditionalModelDataSource(
        channel_name=EAGLE_MODEL_CHANNEL, s3_data_source=s3_prefix_source(head_uri)
    )
    container = container.model_copy(update={"additional_model_data_sources": [*channels, head]})
    return {"ModelName": name, "PrimaryContainer": container.to_wire(), "ExecutionRoleArn": job.role_arn}


def create_output_model(session: Session, job: JobSpec, request: dict[str, Any]) -> OutputModel:
    """Create the model, or accept one this job already created (a redelivered publish).

    In the caller's unit of work: the CreateModel service only flushes, the caller commits.
    """
    name = str(request["ModelName"])
    existing = get_sagemaker_model_by_name(session, account_id=job.account_id, region=job.region, name=name)
    if existing is not None:
        if existing.primary_container == request["PrimaryContainer"]:
            return OutputModel(name=existing.name, arn=existing.arn)
        raise JobFailedError(
            f"OutputConfig.SageMakerModel: a model named {name!r} already exists ({existing.arn}) "
            "and does not point at this job's head; choose another ModelName"
        )
    # No request was signed here: the worker acts for the job's account and region.
    principal = Principal(
        account_id=job.account_id, aws_account_id=job.aws_account_id, access_key_id="", region=job.region
    )
    try:
        model = create_model(session, principal=principal, request=CreateModelInput.model_validate(request))
    except AwsError as error:
        raise JobFailedError(
            f"OutputConfig.SageMakerModel {name!r} could not be created: {error.message}"
        ) from error
    except ValidationError as error:
        reason = "; ".join(
            str(detail.get("ctx", {}).get("aws_message", detail["msg"])) for detail in error.errors()
        )
        raise JobFailedError(
            f"OutputConfig.SageMakerModel {name!r} could not be created: {reason}"
        ) from error
    return OutputModel(name=model.name, arn=model.arn)
