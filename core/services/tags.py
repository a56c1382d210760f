"""AddTags, ListTags and DeleteTags: the tags of models, optimization jobs, endpoint configs and
endpoints, addressed by ARN.

The same store as the Tags member of CreateModel and CreateOptimizationJob (resource_tags.py).
Like the other services these never commit: the request's unit of work does.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import ObjectDeletedError

from core.principal import Principal
from core.sagemaker.errors import ResourceLimitExceeded, ResourceNotFound, ValidationException
from core.sagemaker.shapes.common import Tag
from core.sagemaker.shapes.tags import AddTagsInput, DeleteTagsInput, ListTagsInput
from core.services.pagination import TokenScope, decode_next_token, encode_next_token, query_fingerprint
from core.services.request_checks import require_user_tag_keys, require_valid_tags
from db.arns import sagemaker_arn
from db.models.endpoint import Endpoint
from db.models.endpoint_config import EndpointConfig
from db.models.optimization_job import OptimizationJob
from db.models.resource_tag import ResourceTag
from db.models.sagemaker_model import SageMakerModel
from db.queries.endpoint import get_endpoint_by_name
from db.queries.endpoint_config import get_endpoint_config_by_name
from db.queries.optimization_job import get_optimization_job_by_name
from db.queries.resource_tag import (
    delete_resource_tag_keys,
    list_resource_tags,
    list_resource_tags_page,
    set_resource_tags,
)
from db.queries.sagemaker_model import get_sagemaker_model_by_name

# AWS's tagging limit: 50 user tags per resource (the "aws:" prefix is checked in request_checks).
MAX_TAGS_PER_RESOURCE = 50
DEFAULT_MAX_RESULTS = 50
# The resource types (the ARN's resource part before the "/") that carry tags here.
TAGGABLE_TYPES = {
    "model": "model",
    "optimization-job": "optimization job",
    "endpoint-config": "endpoint configuration",
    "endpoint": "endpoint",
}

TaggedResource = SageMakerModel | OptimizationJob | EndpointConfig | Endpoint


@dataclass(frozen=True)
class TagPage:
    tags: list[ResourceTag]
    next_token: str | None


def _not_found(kind: str, arn: str) -> ResourceNotFound:
    return ResourceNotFound(f'Could not find {kind} "{arn}".')


def _find_resource(session: Session, *, principal: Principal, arn: str) -> TaggedResource:
    """The principal's model or job that ``arn`` names; another account's is not found either."""
    parts = arn.split(":", 5)
    resource_type, _, name = parts[5].partition("/") if len(parts) == 6 else ("", "", "")
    if resource_type not in TAGGABLE_TYPES or not name:
        raise ValidationException(
            f"The resource ARN '{arn}' names no taggable resource: this service tags "
            "model/<name>, optimization-job/<name>, endpoint-config/<name> and endpoint/<name> resources."
        )
    not_found = _not_found(TAGGABLE_TYPES[resource_type], arn)
    _, partition, _, region, aws_account_id, _ = parts
    if partition != "aws" or region != principal.region or aws_account_id != principal.aws_account_id:
        raise not_found
    resource: TaggedResource | None
    resource = _lookup(session, resource_type, account_id=principal.account_id, region=region, name=name)
    expected = sagemaker_arn(
        region=region, aws_account_id=aws_account_id, resource_type=resource_type, name=name
    )
    if resource is None or resource.arn != expected:
        raise not_found
    return resource


def _lookup(
    session: Session, resource_type: str, *, account_id: int, region: str, name: str
) -> TaggedResource | None:
    if resource_type == "model":
        return get_sagemaker_model_by_name(session, account_id=account_id, region=region, name=name)
    if resource_type == "endpoint-config":
        return get_endpoint_config_by_name(session, account_id=account_id, region=region, name=name)
    if resource_type == "endpoint":
        return get_endpoint_by_name(session, account_id=account_id, region=region, name=name)
    return get_optimization_job_by_name(session, account_id=account_id, region=region, name=name)


def add_tags(session: Session, *, principal: Principal, request: AddTagsInput) -> list[Tag]:
    """Add or overwrite tags; the resource may end up with at most 50. Returns the tags added."""
    require_valid_tags(request.tags)
    resource = _find_resource(session, principal=principal, arn=request.resource_arn)
    try:
        # Serialises concurrent AddTags on one resource, so the limit holds (a no-op on SQLite).
        session.refresh(resource, with_for_update=True)
    except ObjectDeletedError:
        kind = TAGGABLE_TYPES[request.resource_arn.split(":", 5)[5].partition("/")[0]]
        raise _not_found(kind, request.resource_arn) from None
    existing = {tag.key for tag in list_resource_tags(session, resource_arn=resource.arn)}
    total = len(existing | {tag.key for tag in request.tags})
    if total > MAX_TAGS_PER_RESOURCE:
        raise ResourceLimitExceeded(
            f'Adding {len(request.tags)} tag(s) to "{request.resource_arn}" would give it {total} tags; '
            f"a resource can have at most {MAX_TAGS_PER_RESOURCE}."
        )
    set_resource_tags(
        session,
        account_id=principal.account_id,
        resource_arn=resource.arn,
        tags=[(tag.key, tag.value) for tag in request.tags],
    )
    return list(request.tags)


def list_tags(session: Session, *, principal: Principal, request: ListTagsInput) -> TagPage:
    resource = _find_resource(session, principal=principal, arn=request.resource_arn)
    scope = TokenScope(query_fingerprint({"ResourceArn": resource.arn}), account_id=principal.account_id)
    page = list_resource_tags_page(
        session,
        resource_arn=resource.arn,
        limit=request.max_results or DEFAULT_MAX_RESULTS,
        cursor=decode_next_token(request.next_token, scope),
    )
    return TagPage(tags=page.items, next_token=encode_next_token(page.next_cursor, scope))


def delete_tags(session: Session, *, principal: Principal, request: DeleteTagsInput) -> None:
    """Remove these keys; keys the resource does not have are not an error."""
    require_user_tag_keys(request.tag_keys, "tagKeys.{}.member")
    resource = _find_resource(session, principal=principal, arn=request.resource_arn)
    delete_resource_tag_keys(session, resource_arn=resource.arn, keys=request.tag_keys)
