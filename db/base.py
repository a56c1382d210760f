"""Declarative base shared by every table: naming convention plus id and timestamp mixins."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from db.types import UtcDateTime, utc_now

# Deterministic constraint names keep Alembic autogenerate diffs stable on both backends.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class IdMixin:
    id: Mapped[int] = mapped_column(primary_key=True)


class CreatedAtMixin:
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utc_now, nullable=False)


class TimestampMixin(CreatedAtMixin):
    """created_at plus a last-modified time.

    The repository functions set ``last_modified_at`` themselves (no ``onupdate``): AWS's
    LastModifiedTime moves on meaningful changes, not on bookkeeping such as a task id.
    """

    last_modified_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utc_now, nullable=False)
