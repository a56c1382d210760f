"""Repository functions for resource tags."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from db.models.resource_tag import ResourceTag
from db.queries.listing import Page, PageCursor


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


def list_resource_tags_page(
    session: Session, *, resource_arn: str, limit: int, cursor: PageCursor | None = None
) -> Page[ResourceTag]:
    """One page of a resource's tags in the order they were first added (keyset on the id)."""
    statement = select(ResourceTag).where(ResourceTag.resource_arn == resource_arn)
    if cursor is not None:
        statement = statement.where(ResourceTag.id > cursor.row_id)
    rows = list(session.scalars(statement.order_by(ResourceTag.id).limit(limit + 1)))
    if len(rows) <= limit:
        return Page(items=rows, next_cursor=None)
    last = rows[limit - 1]
    return Page(items=rows[:limit], next_cursor=PageCursor(sort_value=str(last.id), row_id=last.id))


def delete_resource_tag_keys(session: Session, *, resource_arn: str, keys: Sequence[str]) -> None:
    """Remove these keys from a resource; keys it does not have are ignored."""
    session.execute(
        delete(ResourceTag).where(ResourceTag.resource_arn == resource_arn, ResourceTag.key.in_(keys))
    )


def delete_resource_tags(session: Session, *, resource_arn: str) -> None:
    session.execute(delete(ResourceTag).where(ResourceTag.resource_arn == resource_arn))
