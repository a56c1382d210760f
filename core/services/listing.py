"""Translate List* request members into a db PageRequest and the scope of its NextTokens."""

from __future__ import annotations

from typing import Any

from core.services.pagination import TokenScope, decode_next_token, query_fingerprint
from db.queries.listing import PageRequest, SortKey


def page_request(
    *,
    sort_by: str | None,
    sort_order: str | None,
    default_order: str,
    max_results: int | None,
    default_max_results: int,
    next_token: str | None,
    filters: dict[str, Any],
    account_id: int,
) -> tuple[PageRequest, TokenScope]:
    """The page to fetch and what this query's NextTokens are bound to."""
    sort_key = SortKey(sort_by or SortKey.CREATION_TIME.value)
    order = sort_order or default_order
    scope = TokenScope(
        query_fingerprint({**filters, "SortBy": sort_key.value, "SortOrder": order}), account_id=account_id
    )
    page = PageRequest(
        sort_key=sort_key,
        descending=order == "Descending",
        limit=max_results or default_max_results,
        cursor=decode_next_token(next_token, scope),
    )
    return page, scope
