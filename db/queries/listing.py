"""Filtering, sorting and keyset pagination shared by the List* repository functions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Select, and_, or_
from sqlalchemy.orm import InstrumentedAttribute, Session

RowT = TypeVar("RowT", bound=Any)


class SortKey(StrEnum):
    NAME = "Name"
    CREATION_TIME = "CreationTime"
    STATUS = "Status"


@dataclass(frozen=True)
class PageCursor:
    """Where the previous page ended: the last row's sort value (as text) and its id."""

    sort_value: str
    row_id: int


@dataclass(frozen=True)
class PageRequest:
    sort_key: SortKey = SortKey.CREATION_TIME
    descending: bool = True
    limit: int = 50
    cursor: PageCursor | None = None


@dataclass(frozen=True)
class Page(Generic[RowT]):
    items: list[RowT]
    next_cursor: PageCursor | None


@dataclass(frozen=True)
class SortColumn:
    """A sortable column: the ORM attribute and whether its cursor text is a datetime."""

    column: InstrumentedAttribute[Any]
    is_datetime: bool = False

    def parse(self, text: str) -> Any:
        return datetime.fromisoformat(text) if self.is_datetime else text

    def cursor_text(self, row: Any) -> str:
        value = getattr(row, self.column.key)
        return value.isoformat() if isinstance(value, datetime) else str(value)


@dataclass(frozen=True)
class TimeRange:
    """Bounds of the AWS ``*TimeAfter`` / ``*TimeBefore`` filters: exclusive, except where an
    operation documents "greater than or equal to" (ListModels' CreationTimeAfter)."""

    after: datetime | None = None
    before: datetime | None = None
    after_inclusive: bool = False

    def apply(self, statement: Select[RowT], column: InstrumentedAttribute[datetime]) -> Select[RowT]:
        if self.after is not None:
            statement = statement.where(column >= self.after if self.after_inclusive else column > self.after)
        if self.before is not None:
            statement = statement.where(column < self.before)
        return statement


# An unbounded range; module-level so it can serve as a default argument.
ANY_TIME = TimeRange()


def contains_pattern(text: str) -> str:
    """A LIKE pattern matching ``text`` anywhere; callers compare against lower-cased columns."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def contains(column: ColumnElement[str] | InstrumentedAttribute[str], text: str) -> ColumnElement[bool]:
    """``column`` holds ``text`` anywhere, with LIKE's wildcards in ``text`` taken literally."""
    return column.like(contains_pattern(text), escape="\\")


@dataclass(frozen=True)
class NamedTable:
    """A table of per-account resources with SageMaker names, as List* filters and sorts it:
    NameContains on the lower-cased name, CreationTimeAfter/Before, SortBy Name or
    CreationTime (plus ``more_sorts``), ties broken by id."""

    what: str
    id_column: InstrumentedAttribute[int]
    name_key: InstrumentedAttribute[str]
    created_at: InstrumentedAttribute[datetime]
    more_sorts: Mapping[SortKey, SortColumn] = field(default_factory=dict)

    def sort_column(self, key: SortKey) -> SortColumn:
        if key == SortKey.NAME:
            return SortColumn(self.name_key)
        if key == SortKey.CREATION_TIME:
            return SortColumn(self.created_at, is_datetime=True)
        if key in self.more_sorts:
            return self.more_sorts[key]
        raise ValueError(f"{self.what} cannot be sorted by {key}")


def list_named_rows(
    session: Session,
    statement: Select[RowT],
    *,
    table: NamedTable,
    page: PageRequest,
    name_contains: str | None,
    created: TimeRange,
) -> Page[RowT]:
    """One page of ``statement``'s rows (already scoped to an account and any other filters)
    after the NameContains and CreationTime filters, in the order ``page`` asks for."""
    if name_contains:
        statement = statement.where(contains(table.name_key, name_contains))
    statement = created.apply(statement, table.created_at)
    return fetch_page(
        session, statement, sort=table.sort_column(page.sort_key), id_column=table.id_column, page=page
    )


def fetch_page(
    session: Session,
    statement: Select[RowT],
    *,
    sort: SortColumn,
    id_column: InstrumentedAttribute[int],
    page: PageRequest,
) -> Page[RowT]:
    """Order by (sort column, id) and return the rows after the cursor.

    Keyset rather than offset pagination: rows created while a client pages through
    neither shift nor repeat entries on later pages. One extra row is fetched to learn
    whether another page exists.
    """
    column = sort.column
    if page.cursor is not None:
        value = sort.parse(page.cursor.sort_value)
        if page.descending:
            after = or_(column < value, and_(column == value, id_column < page.cursor.row_id))
        else:
            after = or_(column > value, and_(column == value, id_column > page.cursor.row_id))
        statement = statement.where(after)
    if page.descending:
        statement = statement.order_by(column.desc(), id_column.desc())
    else:
        statement = statement.order_by(column.asc(), id_column.asc())
    rows = list(session.scalars(statement.limit(page.limit + 1)))
    if len(rows) <= page.limit:
        return Page(items=rows, next_cursor=None)
    items = rows[: page.limit]
    last = items[-1]
    return Page(items=items, next_cursor=PageCursor(sort_value=sort.cursor_text(last), row_id=last.id))
