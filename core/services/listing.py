"""Translate List* request members into a db PageRequest and the scope of its NextTokens."""

from __future__ import annotations

from typing import Any, Protocol

from core.services.pagination import TokenScope, decode_next_token, query_fingerprint
from db.queries.listing import PageRequest, SortKey


class ListRequest(Protocol):
    """The paging members every List* input shares (SageMaker spells them alike everywhere)."""

    @property
    def sort_by(self) -> str | None: ...
    @property
    def sort_order(self) -> str | None: ...
    @property
    def max_results(self) -> int | None: ...
    @property
    def next_token(self) -> str | None: ...


def page_request(
    request: ListRequest,
    *,
    default_order: str,
    default_max_results: int,
    filters: dict[str, Any],
    account_id: int,
    region: str,
) -> tuple[PageRequest, TokenScope]:
    """The page to fetch and what this query's NextTokens are bound to (its filters and order)."""
    sort_key = SortKey(request.sort_by or SortKey.CREATION_TIME.value)
    order = request.sort_order or default_order
    scope = TokenScope(
        # The region is part of the query: a token from one region's listing means nothing in another.
        query_fingerprint({**filters, "SortBy": sort_key.value, "SortOrder": order, "Region": region}),
        account_id=account_id,
    )
    page = PageRequest(
        sort_key=sort_key,
        descending=order == "Descending",
        limit=request.max_results or default_max_results,
        cursor=decode_next_token(request.next_token, scope),
    )
    return page, scope
