"""The serving instances of endpoints: written by their supervisor, read by Describe and InvokeEndpoint."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from db.models.endpoint import Endpoint
from db.models.endpoint_instance import EndpointInstance
from db.models.endpoint_status import SERVING_STATUSES
from db.types import utc_now

IN_SERVICE = "InService"
PENDING = "Pending"
FAILED = "Failed"


def list_endpoint_instances(
    session: Session, *, endpoint_id: int, generation: int | None = None
) -> list[EndpointInstance]:
    statement = select(EndpointInstance).where(EndpointInstance.endpoint_id == endpoint_id)
    if generation is not None:
        statement = statement.where(EndpointInstance.generation == generation)
    return list(session.scalars(statement.order_by(EndpointInstance.generation, EndpointInstance.ordinal)))


def serving_urls(session: Session, *, endpoint_id: int, generation: int) -> list[str]:
    """The URLs of the generation's instances that answer requests now."""
    rows = session.scalars(
        select(EndpointInstance.url).where(
            EndpointInstance.endpoint_id == endpoint_id,
            EndpointInstance.generation == generation,
            EndpointInstance.status == IN_SERVICE,
            EndpointInstance.url.is_not(None),
        )
    )
    return [url for url in rows if url]


def report_endpoint_instance(
    session: Session,
    *,
    endpoint_id: int,
    generation: int,
    variant_name: str,
    ordinal: int,
    status: str,
    url: str | None,
    message: str | None = None,
    restarted: bool = False,
) -> EndpointInstance:
    """Insert or update the row of one instance (its supervisor is the only writer)."""
    instance = session.scalar(
        select(EndpointInstance).where(
            EndpointInstance.endpoint_id == endpoint_id,
            EndpointInstance.generation == generation,
            EndpointInstance.ordinal == ordinal,
        )
    )
    if instance is None:
        instance = EndpointInstance(
            endpoint_id=endpoint_id,
            generation=generation,
            variant_name=variant_name,
            ordinal=ordinal,
            restarts=0,
        )
        session.add(instance)
    instance.status = status
    instance.url = url
    instance.message = message
    instance.updated_at = utc_now()
    if restarted:
        instance.restarts += 1
    session.flush()
    return instance


def delete_generation_instances(session: Session, *, endpoint_id: int, generation: int) -> None:
    session.execute(
        delete(EndpointInstance).where(
            EndpointInstance.endpoint_id == endpoint_id, EndpointInstance.generation == generation
        )
    )


def serving_instance_urls(session: Session, *, account_id: int | None = None) -> list[tuple[str, str]]:
    """(endpoint ARN, instance URL) of every instance serving now, of one account or all."""
    statement = (
        select(Endpoint.arn, EndpointInstance.url)
        .join(EndpointInstance, EndpointInstance.endpoint_id == Endpoint.id)
        .where(
            Endpoint.status.in_(list(SERVING_STATUSES)),
            EndpointInstance.generation == Endpoint.generation,
            EndpointInstance.status == IN_SERVICE,
            EndpointInstance.url.is_not(None),
        )
    )
    if account_id is not None:
        statement = statement.where(Endpoint.account_id == account_id)
    return [(arn, url) for arn, url in session.execute(statement) if url]
