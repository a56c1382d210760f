"""Repository functions for resource tags."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from db.models.resource_tag import ResourceTag


def set_resource_tags(
    session: Session, *, account_id: int, resource_arn: str, tags: Sequence[tuple[str, str]]
) -> None:
    """Add tags to a resource; a key it already has gets the new value."""
    existing = {tag.key: tag for tag in list_resource_tags(session, resource_arn=resource_arn)}
    for key, value in tags:
        if key in existing:
            existing[key].value = value
        else:
            tag = ResourceTag(account_id=account_id, resource_arn=resource_arn, key=key, value=value)
            session.add(tag)
            existing[key] = tag
    session.flush()


def list_resource_tags(session: Session, *, resource_arn: str) -> list[ResourceTag]:
    return list(
        session.scalars(
            select(ResourceTag).where(ResourceTag.resource_arn == resource_arn).order_by(ResourceTag.id)
        )
    )


def delete_resource_tags(session: Session, *, resource_arn: str) -> None:
    session.execute(delete(ResourceTag).where(ResourceTag.resource_arn == resource_arn))
