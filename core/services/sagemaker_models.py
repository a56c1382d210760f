"""CreateModel, DescribeModel, ListModels and DeleteModel.

These functions never commit: the caller's unit of work does (an api request, or the
worker's publish step, which creates a job's output model inside its own transaction).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from core.principal import Principal
from core.sagemaker.errors import ValidationException
from core.sagemaker.shapes.sagemaker_models import ContainerDefinition, CreateModelInput, ListModelsInput
from core.services.listing import page_request
from core.services.pagination import encode_next_token
from core.services.request_checks import require_valid_tags
from core.services.resource_tags import tag_new_resource
from core.services.roles import require_account_role
from db.arns import sagemaker_model_arn
from db.errors import NameAlreadyExistsError
from db.models.resource_tag import ResourceTag
from db.models.sagemaker_model import SageMakerModel
from db.queries.listing import TimeRange
from db.queries.resource_tag import delete_resource_tags, list_resource_tags
from db.queries.sagemaker_model import (
    create_sagemaker_model,
    delete_sagemaker_model,
    get_sagemaker_model_by_name,
    list_sagemaker_models,
)

# The channel that carries an existing EAGLE head (SageMaker's convention); the worker
# reads it as a directory: an uncompressed S3 prefix, or a model.tar.gz it unpacks.
EAGLE_MODEL_CHANNEL = "eagle_model"
# (S3DataType, CompressionType) pairs the eagle_model channel may use.
EAGLE_MODEL_DATA_FORMATS = {("S3Prefix", "None"), ("S3Object", "Gzip")}
DEFAULT_MAX_RESULTS = 10


@dataclass(frozen=True)
class ModelPage:
    models: list[SageMakerModel]
    next_token: str | None


def model_arn(principal: Principal, name: str) -> str:
    return sagemaker_model_arn(region=principal.region, aws_account_id=principal.aws_account_id, name=name)


def model_not_found(principal: Principal, name: str) -> ValidationException:
    # SageMaker answers ValidationException (not ResourceNotFound) for models; the
    # SageMaker Python SDK and waiters look for exactly this "Could not find" text.
    return ValidationException(f'Could not find model "{model_arn(principal, name)}".')


def _check_container(container: ContainerDefinition, path: str) -> None:
    sources = container.additional_model_data_sources or []
    channels = [source.channel_name for source in sources]
    duplicated = sorted({channel for channel in channels if channels.count(channel) > 1})
    if duplicated:
        raise ValidationException.for_member(
            f"{path}.additionalModelDataSources",
            channels,
            f"Member must have unique ChannelName values; duplicated: {', '.join(duplicated)}",
        )
    for index, source in enumerate(sources, start=1):
        if source.channel_name != EAGLE_MODEL_CHANNEL:
            continue
        data = source.s3_data_source
        if (data.s3_data_type, data.compression_type) not in EAGLE_MODEL_DATA_FORMATS:
            raise ValidationException.for_member(
                f"{path}.additionalModelDataSources.{index}.member.s3DataSource",
                f"S3DataType={data.s3_data_type}, CompressionType={data.compression_type}",
                "The eagle_model channel must be an uncompressed directory (S3DataType S3Prefix, "
                "CompressionType None) or a model.tar.gz (S3DataType S3Object, CompressionType Gzip)",
            )


def create_model(session: Session, *, principal: Principal, request: CreateModelInput) -> SageMakerModel:
    if (request.primary_container is None) == (request.containers is None):
        given = "both" if request.primary_container is not None else "neither"
        raise ValidationException(
            f"Exactly one of PrimaryContainer and Containers must be specified; got {given}."
        )
    if request.primary_container is not None:
        _check_container(request.primary_container, "primaryContainer")
    for index, container in enumerate(request.containers or [], start=1):
        _check_container(container, f"containers.{index}.member")
    require_valid_tags(request.tags)
    if request.execution_role_arn is not None:
        require_account_role(session, principal=principal, role_arn=request.execution_role_arn)
    arn = model_arn(principal, request.model_name)
    try:
        model = create_sagemaker_model(
            session,
            account_id=principal.account_id,
            name=request.model_name,
            region=principal.region,
            arn=arn,
            primary_container=None
            if request.primary_container is None
            else request.primary_container.to_wire(),
            containers=None if request.containers is None else [c.to_wire() for c in request.containers],
            inference_execution_config=None
            if request.inference_execution_config is None
            else request.inference_execution_config.to_wire(),
            execution_role_arn=request.execution_role_arn,
            vpc_config=None if request.vpc_config is None else request.vpc_config.to_wire(),
            enable_network_isolation=request.enable_network_isolation,
        )
    except NameAlreadyExistsError:
        raise ValidationException(f'Cannot create already existing model "{arn}".') from None
    tag_new_resource(session, principal=principal, arn=arn, tags=request.tags)
    session.flush()
    return model


def get_model(session: Session, *, principal: Principal, name: str) -> SageMakerModel:
    model = get_sagemaker_model_by_name(
        session, account_id=principal.account_id, region=principal.region, name=name
    )
    if model is None:
        raise model_not_found(principal, name)
    return model


def get_model_tags(session: Session, *, model: SageMakerModel) -> list[ResourceTag]:
    return list_resource_tags(session, resource_arn=model.arn)


def list_models(session: Session, *, principal: Principal, request: ListModelsInput) -> ModelPage:
    filters = {
        "NameContains": request.name_contains,
        "CreationTimeAfter": request.creation_time_after,
        "CreationTimeBefore": request.creation_time_before,
    }
    page, fingerprint = page_request(
        request,
        default_order="Descending",
        default_max_results=DEFAULT_MAX_RESULTS,
        filters=filters,
        account_id=principal.account_id,
        region=principal.region,
    )
    result = list_sagemaker_models(
        session,
        account_id=principal.account_id,
        region=principal.region,
        page=page,
        name_contains=request.name_contains,
        created=TimeRange(
            after=request.creation_time_after, before=request.creation_time_before, after_inclusive=True
        ),
    )
    return ModelPage(models=result.items, next_token=encode_next_token(result.next_cursor, fingerprint))


def delete_model(session: Session, *, principal: Principal, name: str) -> None:
    model = get_model(session, principal=principal, name=name)
    # A DELETE ... WHERE whose row count says whether this call or a parallel one deleted it.
    if not delete_sagemaker_model(session, model=model):
        raise model_not_found(principal, name)
    delete_resource_tags(session, resource_arn=model.arn)
