"""Queries on log groups; every one is scoped to an account and a region."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.models.log_event import LogEvent
from db.models.log_group import LogGroup


def get_log_group(session: Session, *, account_id: int, region: str, name: str) -> LogGroup | None:
    return session.scalars(
        select(LogGroup).where(
            LogGroup.account_id == account_id, LogGroup.region == region, LogGroup.name == name
        )
    ).one_or_none()


def ensure_log_group(
    session: Session, *, account_id: int, region: str, name: str, retention_in_days: int
) -> LogGroup:
    """The group, created on first use; a concurrent writer creating it too is not an error."""
    existing = get_log_group(session, account_id=account_id, region=region, name=name)
    if existing is not None:
        return existing
    group = LogGroup(account_id=account_id, region=region, name=name, retention_in_days=retention_in_days)
    try:
        with session.begin_nested():
            session.add(group)
    except IntegrityError:
        found = get_log_group(session, account_id=account_id, region=region, name=name)
        assert found is not None, "the unique key said the group exists"
        return found
    return group


def list_log_groups(
    session: Session,
    *,
    account_id: int,
    region: str,
    name_prefix: str | None = None,
    name_contains: str | None = None,
    names: Sequence[str] | None = None,
    after_name: str | None = None,
    limit: int,
) -> list[LogGroup]:
    """Groups in name order, ``limit`` of them after ``after_name`` (the page token)."""
    query = select(LogGroup).where(LogGroup.account_id == account_id, LogGroup.region == region)
    if name_prefix:
        query = query.where(LogGroup.name.startswith(name_prefix, autoescape=True))
    if name_contains:
        query = query.where(LogGroup.name.contains(name_contains, autoescape=True))
    if names is not None:
        query = query.where(LogGroup.name.in_(names))
    if after_name is not None:
        query = query.where(LogGroup.name > after_name)
    return list(session.scalars(query.order_by(LogGroup.name).limit(limit)))


def stored_bytes_by_group(session: Session, *, group_ids: Sequence[int]) -> dict[int, int]:
    """The size of the messages each group holds (DescribeLogGroups' storedBytes)."""
    if not group_ids:
        return {}
    rows = session.execute(
        select(LogEvent.log_group_id, func.coalesce(func.sum(func.length(LogEvent.message)), 0))
        .where(LogEvent.log_group_id.in_(group_ids))
        .group_by(LogEvent.log_group_id)
    )
    return {group_id: int(size) for group_id, size in rows}
