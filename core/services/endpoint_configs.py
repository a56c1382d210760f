"""CreateEndpointConfig, DescribeEndpointConfig, ListEndpointConfigs and DeleteEndpointConfig.

A configuration names what an endpoint serves: one production variant (a SageMaker model on
an instance type, InitialInstanceCount serving processes) and optionally DataCaptureConfig.
Members eaglenest cannot honour are refused here, at creation, with what it does serve,
rather than accepted and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from core.principal import Principal
from core.sagemaker.errors import ResourceLimitExceeded, ValidationException
from core.sagemaker.shapes.endpoint_configs import (
    CreateEndpointConfigInput,
    ListEndpointConfigsInput,
    ProductionVariant,
)
from core.services.listing import page_request
from core.services.pagination import encode_next_token
from core.services.request_checks import require_s3_uri, require_valid_tags
from core.services.resource_tags import tag_new_resource
from core.services.roles import require_account_role
from core.services.sagemaker_models import get_model
from db.arns import sagemaker_arn
from db.errors import NameAlreadyExistsError
from db.models.endpoint_config import EndpointConfig
from db.models.sagemaker_model import SageMakerModel
from db.queries.endpoint_config import (
    create_endpoint_config as insert_endpoint_config,
)
from db.queries.endpoint_config import (
    delete_endpoint_config as delete_endpoint_config_row,
)
from db.queries.endpoint_config import (
    get_endpoint_config_by_name,
)
from db.queries.endpoint_config import (
    list_endpoint_configs as list_endpoint_config_rows,
)
from db.queries.listing import TimeRange
from db.queries.resource_tag import delete_resource_tags
from db.settings import Settings

DEFAULT_MAX_RESULTS = 10
# Members of CreateEndpointConfig that would change how requests are served in ways this
# engine does not implement; a request that sets one is refused, naming it.
UNSERVED_MEMBERS = ("AsyncInferenceConfig", "ExplainerConfig", "ShadowProductionVariants")
UNSERVED_VARIANT_MEMBERS = ("ServerlessConfig", "InstancePools", "ManagedInstanceScaling")


@dataclass(frozen=True)
class EndpointConfigPage:
    configs: list[EndpointConfig]
    next_token: str | None


def endpoint_config_arn(principal: Principal, name: str) -> str:
    return sagemaker_arn(
        region=principal.region,
        aws_account_id=principal.aws_account_id,
        resource_type="endpoint-config",
        name=name,
    )


def endpoint_config_not_found(principal: Principal, name: str) -> ValidationException:
    # SageMaker's wording; its SDK matches "Could not find endpoint configuration".
    return ValidationException(
        f'Could not find endpoint configuration "{endpoint_config_arn(principal, name)}".'
    )


def _check_variant(
    session: Session, *, principal: Principal, settings: Settings, variant: ProductionVariant
) -> SageMakerModel:
    path = "productionVariants.1.member"
    wire = variant.to_wire()
    for member in UNSERVED_VARIANT_MEMBERS:
        if member in wire:
            raise ValidationException(
                f"ProductionVariant {member} is not supported by eaglenest: a variant runs "
                "InitialInstanceCount serving processes of InstanceType."
            )
    if variant.model_name is None:
        raise ValidationException.for_member(f"{path}.modelName", None, "Member must not be null")
    if variant.instance_type is None or variant.initial_instance_count is None:
        raise ValidationException(
            f"ProductionVariant {variant.variant_name} must specify InstanceType and InitialInstanceCount."
        )
    if variant.instance_type not in settings.endpoint_instance_types:
        raise ValidationException.for_member(
            f"{path}.instanceType",
            variant.instance_type,
            "Member must be an instance type this deployment's endpoint workers serve: "
            + ", ".join(settings.endpoint_instance_types),
        )
    if variant.initial_instance_count > settings.max_endpoint_instances:
        raise ResourceLimitExceeded(
            f"The account-level service limit 'instances per variant' is {settings.max_endpoint_instances} "
            f"Instances, with current utilization of 0 Instances and a request delta of "
            f"{variant.initial_instance_count} Instances."
        )
    return get_model(session, principal=principal, name=variant.model_name)


def create_endpoint_config(
    session: Session, *, principal: Principal, settings: Settings, request: CreateEndpointConfigInput
) -> EndpointConfig:
    spec = request.to_wire()
    for member in UNSERVED_MEMBERS:
        if member in spec:
            raise ValidationException(f"{member} is not supported by eaglenest endpoints.")
    if len(request.production_variants) != 1:
        raise ValidationException.for_member(
            "productionVariants",
            [variant.variant_name for variant in request.production_variants],
            "Member must have length 1 (eaglenest endpoints serve one production variant)",
        )
    require_valid_tags(request.tags)
    variant = request.production_variants[0]
    model = _check_variant(session, principal=principal, settings=settings, variant=variant)
    capture = request.data_capture_config
    if capture is not None:
        require_s3_uri(capture.destination_s3_uri, "dataCaptureConfig.destinationS3Uri")
        if request.execution_role_arn is None and model.execution_role_arn is None:
            raise ValidationException(
                "DataCaptureConfig needs a role to write to S3 as: the configuration's ExecutionRoleArn "
                f"or the ExecutionRoleArn of model {model.name}."
            )
    if request.execution_role_arn is not None:
        require_account_role(session, principal=principal, role_arn=request.execution_role_arn)
    arn = endpoint_config_arn(principal, request.endpoint_config_name)
    for member in ("EndpointConfigName", "Tags"):
        spec.pop(member, None)
    try:
        config = insert_endpoint_config(
            session,
            account_id=principal.account_id,
            name=request.endpoint_config_name,
            region=principal.region,
            arn=arn,
            spec=spec,
        )
    except NameAlreadyExistsError:
        raise ValidationException(f'Cannot create already existing endpoint configuration "{arn}".') from None
    tag_new_resource(session, principal=principal, arn=arn, tags=request.tags)
    session.flush()
    return config


def get_endpoint_config(session: Session, *, principal: Principal, name: str) -> EndpointConfig:
    config = get_endpoint_config_by_name(
        session, account_id=principal.account_id, region=principal.region, name=name
    )
    if config is None:
        raise endpoint_config_not_found(principal, name)
    return config


def list_endpoint_configs(
    session: Session, *, principal: Principal, request: ListEndpointConfigsInput
) -> EndpointConfigPage:
    filters = {
        "NameContains": request.name_contains,
        "CreationTimeAfter": request.creation_time_after,
        "CreationTimeBefore": request.creation_time_before,
    }
    page, scope = page_request(
        request,
        default_order="Descending",
        default_max_results=DEFAULT_MAX_RESULTS,
        filters=filters,
        account_id=principal.account_id,
        region=principal.region,
    )
    result = list_endpoint_config_rows(
        session,
        account_id=principal.account_id,
        region=principal.region,
        page=page,
        name_contains=request.name_contains,
        created=TimeRange(after=request.creation_time_after, before=request.creation_time_before),
    )
    return EndpointConfigPage(configs=result.items, next_token=encode_next_token(result.next_cursor, scope))


def delete_endpoint_config(session: Session, *, principal: Principal, name: str) -> None:
    """As on SageMaker, an endpoint using the configuration keeps serving (it holds a copy)."""
    config = get_endpoint_config(session, principal=principal, name=name)
    if not delete_endpoint_config_row(session, config=config):
        raise endpoint_config_not_found(principal, name)
    delete_resource_tags(session, resource_arn=config.arn)
