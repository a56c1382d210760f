"""Repository functions for endpoint configurations (CreateEndpointConfig and friends)."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import CursorResult, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.errors import NameAlreadyExistsError
from db.models.endpoint_config import EndpointConfig
from db.queries.listing import ANY_TIME, NamedTable, Page, PageRequest, TimeRange, list_named_rows
from db.types import utc_now

_TABLE = NamedTable(
    what="endpoint configurations",
    id_column=EndpointConfig.id,
    name_key=EndpointConfig.name_key,
    created_at=EndpointConfig.created_at,
)


def get_endpoint_config_by_name(
    session: Session, *, account_id: int, region: str, name: str
) -> EndpointConfig | None:
    return session.scalar(
        select(EndpointConfig).where(
            EndpointConfig.account_id == account_id,
            EndpointConfig.region == region,
            EndpointConfig.name_key == name.lower(),
        )
    )


def create_endpoint_config(
    session: Session, *, account_id: int, name: str, region: str, arn: str, spec: dict[str, Any]
) -> EndpointConfig:
    """Insert a configuration; NameAlreadyExistsError when the account has that name in the region."""
    if get_endpoint_config_by_name(session, account_id=account_id, region=region, name=name) is not None:
        raise NameAlreadyExistsError(name)
    config = EndpointConfig(
        account_id=account_id,
        name=name,
        name_key=name.lower(),
        region=region,
        arn=arn,
        spec=spec,
        created_at=utc_now(),
    )
    try:
        with session.begin_nested():
            session.add(config)
    except IntegrityError as error:  # a concurrent create with the same name won the race
        raise NameAlreadyExistsError(name) from error
    return config


def delete_endpoint_config(session: Session, *, config: EndpointConfig) -> bool:
    """One DELETE ... WHERE; returns whether it deleted the row (of parallel deletes, exactly one)."""
    session.flush()
    result = cast(
        CursorResult[Any],
        session.execute(
            delete(EndpointConfig)
            .where(EndpointConfig.id == config.id)
            .execution_options(synchronize_session=False)
        ),
    )
    if result.rowcount != 1:
        return False
    if config in session:
        session.expunge(config)
    return True


def list_endpoint_configs(
    session: Session,
    *,
    account_id: int,
    region: str,
    page: PageRequest,
    name_contains: str | None = None,
    created: TimeRange = ANY_TIME,
) -> Page[EndpointConfig]:
    statement = select(EndpointConfig).where(
        EndpointConfig.account_id == account_id, EndpointConfig.region == region
    )
    return list_named_rows(
        session, statement, table=_TABLE, page=page, name_contains=name_contains, created=created
    )
