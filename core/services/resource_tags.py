"""The Tags member of Create* requests: stored per ARN, so every resource type shares them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from core.principal import Principal
from core.sagemaker.shapes.common import Tag
from db.queries.resource_tag import set_resource_tags


def tag_new_resource(session: Session, *, principal: Principal, arn: str, tags: Sequence[Tag] | None) -> None:
    """Store a Create* request's Tags for the resource it created (in the same transaction)."""
    if tags:
        set_resource_tags(
            session,
            account_id=principal.account_id,
            resource_arn=arn,
            tags=[(tag.key, tag.value) for tag in tags],
        )
