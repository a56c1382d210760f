"""CreateEndpoint, DescribeEndpoint, ListEndpoints, UpdateEndpoint and DeleteEndpoint.

The api writes the endpoint's wanted state (Creating, Updating with a pending config,
Deleting); the endpoint's supervisor, a worker task, does the rest and reports back through
the same row: InService or Failed, the new generation after an update, and the row's
removal once its instances are stopped.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from core.job_dispatcher import JobDispatcher
from core.principal import Principal
from core.sagemaker.errors import ValidationException
from core.sagemaker.shapes.endpoints import CreateEndpointInput, ListEndpointsInput, UpdateEndpointInput
from core.services.endpoint_configs import get_endpoint_config
from core.services.listing import page_request
from core.services.pagination import encode_next_token
from core.services.request_checks import require_valid_tags
from core.services.resource_tags import tag_new_resource
from db.arns import sagemaker_arn
from db.errors import NameAlreadyExistsError
from db.models.endpoint import Endpoint
from db.models.endpoint_status import EndpointStatus
from db.queries.endpoint import (
    EndpointListFilter,
    EndpointStatusChangedError,
    change_endpoint,
    delete_endpoint_row,
    get_endpoint_by_name,
    set_endpoint_task_id,
)
from db.queries.endpoint import create_endpoint as insert_endpoint
from db.queries.endpoint import (
    list_endpoints as list_endpoint_rows,
)
from db.queries.listing import TimeRange
from db.queries.resource_tag import delete_resource_tags
from db.session import UnitOfWork
from db.types import utc_now

logger = logging.getLogger(__name__)

DEFAULT_MAX_RESULTS = 10
# Without a supervisor to stop instances, these are deleted at once.
UNSUPERVISED_STATUSES = frozenset({EndpointStatus.FAILED, EndpointStatus.OUT_OF_SERVICE})
DELETABLE_STATUSES = frozenset(set(EndpointStatus) - {EndpointStatus.DELETING})


@dataclass(frozen=True)
class EndpointPage:
    endpoints: list[Endpoint]
    next_token: str | None


def endpoint_arn(principal: Principal, name: str) -> str:
    return sagemaker_arn(
        region=principal.region, aws_account_id=principal.aws_account_id, resource_type="endpoint", name=name
    )


def endpoint_not_found(principal: Principal, name: str) -> ValidationException:
    # The waiters (endpoint_deleted, endpoint_in_service) match ValidationException.
    return ValidationException(f'Could not find endpoint "{endpoint_arn(principal, name)}".')


def instance_type_of(spec: dict[str, Any]) -> str:
    return str(spec["ProductionVariants"][0]["InstanceType"])


def create_endpoint(
    unit: UnitOfWork, *, principal: Principal, dispatcher: JobDispatcher, request: CreateEndpointInput
) -> Endpoint:
    session = unit.session
    require_valid_tags(request.tags)
    config = get_endpoint_config(session, principal=principal, name=request.endpoint_config_name)
    arn = endpoint_arn(principal, request.endpoint_name)
    try:
        endpoint = insert_endpoint(
            session,
            account_id=principal.account_id,
            name=request.endpoint_name,
            region=principal.region,
            arn=arn,
            config_name=config.name,
            config_spec=config.spec,
            deployment_config=None
            if request.deployment_config is None
            else request.deployment_config.to_wire(),
        )
    except NameAlreadyExistsError:
        raise ValidationException(f'Cannot create already existing endpoint "{arn}".') from None
    tag_new_resource(session, principal=principal, arn=arn, tags=request.tags)
    session.flush()
    unit.after_commit(partial(_enqueue, endpoint=endpoint, dispatcher=dispatcher))
    return endpoint


def _enqueue(session: Session, *, endpoint: Endpoint, dispatcher: JobDispatcher) -> None:
    """After the endpoint's commit: queue its supervisor, or fail it when the broker refuses."""
    try:
        task_id = dispatcher.enqueue_endpoint(endpoint.id, instance_type_of(endpoint.config_spec))
    except Exception as error:
        logger.exception("could not queue endpoint %s", endpoint.id)
        try:
            change_endpoint(
                session,
                endpoint=endpoint,
                from_statuses={EndpointStatus.CREATING},
                values={
                    "status": EndpointStatus.FAILED,
                    "failure_reason": f"The endpoint could not be queued for a worker: {error}",
                },
            )
        except EndpointStatusChangedError:
            logger.info("endpoint %s changed meanwhile; it stays as it is", endpoint.id)
        return
    set_endpoint_task_id(session, endpoint=endpoint, task_id=task_id)


def get_endpoint(session: Session, *, principal: Principal, name: str) -> Endpoint:
    endpoint = get_endpoint_by_name(
        session, account_id=principal.account_id, region=principal.region, name=name
    )
    if endpoint is None:
        raise endpoint_not_found(principal, name)
    return endpoint


def list_endpoints(session: Session, *, principal: Principal, request: ListEndpointsInput) -> EndpointPage:
    filters = {
        "NameContains": request.name_contains,
        "CreationTimeAfter": request.creation_time_after,
        "CreationTimeBefore": request.creation_time_before,
        "LastModifiedTimeAfter": request.last_modified_time_after,
        "LastModifiedTimeBefore": request.last_modified_time_before,
        "StatusEquals": request.status_equals,
    }
    page, scope = page_request(
        request,
        default_order="Descending",
        default_max_results=DEFAULT_MAX_RESULTS,
        filters=filters,
        account_id=principal.account_id,
        region=principal.region,
    )
    result = list_endpoint_rows(
        session,
        account_id=principal.account_id,
        region=principal.region,
        page=page,
        filters=EndpointListFilter(
            name_contains=request.name_contains,
            status=None if request.status_equals is None else EndpointStatus(request.status_equals),
            created=TimeRange(after=request.creation_time_after, before=request.creation_time_before),
            last_modified=TimeRange(
                after=request.last_modified_time_after, before=request.last_modified_time_before
            ),
        ),
    )
    return EndpointPage(endpoints=result.items, next_token=encode_next_token(result.next_cursor, scope))


def update_endpoint(session: Session, *, principal: Principal, request: UpdateEndpointInput) -> Endpoint:
    """Roll out another configuration: the supervisor starts its instances beside the old ones,
    switches traffic once they answer, then stops the old ones, so no request is dropped."""
    endpoint = get_endpoint(session, principal=principal, name=request.endpoint_name)
    config = get_endpoint_config(session, principal=principal, name=request.endpoint_config_name)
    if instance_type_of(config.spec) != instance_type_of(endpoint.config_spec):
        raise ValidationException(
            "eaglenest cannot move an endpoint to another instance type; create a new endpoint for "
            f"{instance_type_of(config.spec)}."
        )
    values: dict[str, Any] = {
        "status": EndpointStatus.UPDATING,
        "pending_config_name": config.name,
        "pending_config_spec": config.spec,
        "pending_since": utc_now(),
        "failure_reason": None,
    }
    if request.deployment_config is not None:
        values["deployment_config"] = request.deployment_config.to_wire()
    try:
        change_endpoint(session, endpoint=endpoint, from_statuses={EndpointStatus.IN_SERVICE}, values=values)
    except EndpointStatusChangedError:
        session.expire(endpoint)
        endpoint = get_endpoint(session, principal=principal, name=request.endpoint_name)
        raise ValidationException(
            f'Cannot update in-progress endpoint "{endpoint.arn}".'
            if endpoint.status is not EndpointStatus.FAILED
            else f'Cannot update failed endpoint "{endpoint.arn}".'
        ) from None
    return endpoint


def delete_endpoint(session: Session, *, principal: Principal, name: str) -> None:
    """Deleting: the supervisor stops the instances and removes the row; a failed endpoint,
    which has no running supervisor, goes at once."""
    endpoint = get_endpoint(session, principal=principal, name=name)
    if endpoint.status in UNSUPERVISED_STATUSES:
        if not delete_endpoint_row(session, endpoint=endpoint):
            raise endpoint_not_found(principal, name)
        delete_resource_tags(session, resource_arn=endpoint.arn)
        return
    # Already Deleting (a parallel call): DeleteEndpoint is idempotent until the row goes.
    with contextlib.suppress(EndpointStatusChangedError):
        change_endpoint(
            session,
            endpoint=endpoint,
            from_statuses=DELETABLE_STATUSES,
            values={"status": EndpointStatus.DELETING},
        )
    delete_resource_tags(session, resource_arn=endpoint.arn)
