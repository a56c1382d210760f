"""Repository functions for endpoints: the control plane's writes and the supervisor's status changes."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, delete, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from db.errors import NameAlreadyExistsError
from db.models.endpoint import Endpoint
from db.models.endpoint_status import EndpointStatus
from db.queries.listing import (
    ANY_TIME,
    NamedTable,
    Page,
    PageRequest,
    SortColumn,
    SortKey,
    TimeRange,
    list_named_rows,
)
from db.types import utc_now

_TABLE = NamedTable(
    what="endpoints",
    id_column=Endpoint.id,
    name_key=Endpoint.name_key,
    created_at=Endpoint.created_at,
    more_sorts={SortKey.STATUS: SortColumn(Endpoint.status)},
)


@dataclass(frozen=True)
class EndpointListFilter:
    name_contains: str | None = None
    status: EndpointStatus | None = None
    created: TimeRange = ANY_TIME
    last_modified: TimeRange = ANY_TIME


def get_endpoint_by_name(session: Session, *, account_id: int, region: str, name: str) -> Endpoint | None:
    return session.scalar(
        select(Endpoint).where(
            Endpoint.account_id == account_id, Endpoint.region == region, Endpoint.name_key == name.lower()
        )
    )


def get_endpoint_by_id(session: Session, *, endpoint_id: int) -> Endpoint | None:
    return session.get(Endpoint, endpoint_id, populate_existing=True)


def create_endpoint(
    session: Session,
    *,
    account_id: int,
    name: str,
    region: str,
    arn: str,
    config_name: str,
    config_spec: dict[str, Any],
    deployment_config: dict[str, Any] | None,
) -> Endpoint:
    """Insert an endpoint in status Creating; raises NameAlreadyExistsError when the name is taken."""
    if get_endpoint_by_name(session, account_id=account_id, region=region, name=name) is not None:
        raise NameAlreadyExistsError(name)
    now = utc_now()
    endpoint = Endpoint(
        account_id=account_id,
        name=name,
        name_key=name.lower(),
        region=region,
        arn=arn,
        status=EndpointStatus.CREATING,
        config_name=config_name,
        config_spec=config_spec,
        deployment_config=deployment_config,
        generation=0,
        created_at=now,
        last_modified_at=now,
    )
    try:
        with session.begin_nested():
            session.add(endpoint)
    except IntegrityError as error:
        raise NameAlreadyExistsError(name) from error
    return endpoint


class EndpointStatusChangedError(Exception):
    """The endpoint was no longer in the status a change expected (a parallel request moved it)."""


def change_endpoint(
    session: Session,
    *,
    endpoint: Endpoint,
    from_statuses: Collection[EndpointStatus],
    values: dict[str, Any],
) -> None:
    """One conditional UPDATE: applies ``values`` (and LastModifiedTime) only while the row is in
    one of ``from_statuses``, else EndpointStatusChangedError. Of parallel changes one wins."""
    values = {**values, "last_modified_at": utc_now()}
    session.flush()
    result = cast(
        CursorResult[Any],
        session.execute(
            update(Endpoint)
            .where(Endpoint.id == endpoint.id, Endpoint.status.in_(list(from_statuses)))
            .values(values)
            .execution_options(synchronize_session=False)
        ),
    )
    if result.rowcount != 1:
        raise EndpointStatusChangedError(f"endpoint {endpoint.name!r} changed status")
    for key, value in values.items():
        set_committed_value(endpoint, key, value)


def set_endpoint_task_id(session: Session, *, endpoint: Endpoint, task_id: str) -> None:
    endpoint.task_id = task_id
    session.flush()


def delete_endpoint_row(session: Session, *, endpoint: Endpoint) -> bool:
    """Remove the endpoint (its instances go with it); whether this call deleted the row."""
    session.flush()
    result = cast(
        CursorResult[Any],
        session.execute(
            delete(Endpoint).where(Endpoint.id == endpoint.id).execution_options(synchronize_session=False)
        ),
    )
    if result.rowcount != 1:
        return False
    if endpoint in session:
        session.expunge(endpoint)
    return True


def list_endpoints(
    session: Session, *, account_id: int, region: str, page: PageRequest, filters: EndpointListFilter
) -> Page[Endpoint]:
    statement = select(Endpoint).where(Endpoint.account_id == account_id, Endpoint.region == region)
    if filters.status is not None:
        statement = statement.where(Endpoint.status == filters.status)
    statement = filters.last_modified.apply(statement, Endpoint.last_modified_at)
    return list_named_rows(
        session,
        statement,
        table=_TABLE,
        page=page,
        name_contains=filters.name_contains,
        created=filters.created,
    )


def claim_endpoint(session: Session, *, endpoint_id: int, task_id: str, stale_before: datetime) -> bool:
    """Take over supervising: one conditional UPDATE that succeeds when the endpoint is this
    task's (the reaper queued it under this id), never had a supervisor, or its supervisor's
    heartbeat is older than ``stale_before``. Of two supervisors, one wins."""
    result = cast(
        CursorResult[Any],
        session.execute(
            update(Endpoint)
            .where(
                Endpoint.id == endpoint_id,
                or_(
                    Endpoint.task_id == task_id,
                    Endpoint.supervisor_heartbeat_at.is_(None),
                    Endpoint.supervisor_heartbeat_at < stale_before,
                ),
            )
            .values(task_id=task_id, supervisor_heartbeat_at=utc_now())
            .execution_options(synchronize_session=False)
        ),
    )
    return result.rowcount == 1


def beat_endpoint(session: Session, *, endpoint_id: int, task_id: str) -> bool:
    """Refresh the supervisor's lease; False when another task has taken the endpoint over."""
    result = cast(
        CursorResult[Any],
        session.execute(
            update(Endpoint)
            .where(Endpoint.id == endpoint_id, Endpoint.task_id == task_id)
            .values(supervisor_heartbeat_at=utc_now())
            .execution_options(synchronize_session=False)
        ),
    )
    return result.rowcount == 1


def lost_endpoints(session: Session, *, stale_before: datetime) -> list[Endpoint]:
    """Endpoints that had a supervisor whose heartbeat stopped, in a status one must act on."""
    return list(
        session.scalars(
            select(Endpoint).where(
                Endpoint.status.in_(
                    [
                        EndpointStatus.CREATING,
                        EndpointStatus.UPDATING,
                        EndpointStatus.IN_SERVICE,
                        EndpointStatus.DELETING,
                    ]
                ),
                Endpoint.supervisor_heartbeat_at < stale_before,
            )
        )
    )


def hand_over_endpoint(session: Session, *, endpoint: Endpoint, stale_before: datetime, task_id: str) -> bool:
    """The reaper's claim for a new task: only if the heartbeat is still stale (one reaper wins)."""
    result = cast(
        CursorResult[Any],
        session.execute(
            update(Endpoint)
            .where(Endpoint.id == endpoint.id, Endpoint.supervisor_heartbeat_at < stale_before)
            .values(task_id=task_id, supervisor_heartbeat_at=utc_now())
            .execution_options(synchronize_session=False)
        ),
    )
    return result.rowcount == 1
