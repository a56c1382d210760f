"""Translate List* request members into a db PageRequest and a NextToken fingerprint."""

from __future__ import annotations

from typing import Any

from core.services.pagination import decode_next_token, query_fingerprint
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
) -> tuple[PageRequest, str]:
    """The page to fetch and the fingerprint that this query's NextTokens must carry."""
    sort_key = SortKey(sort_by or SortKey.CREATION_TIME.value)
    order = sort_order or default_order
    fingerprint = query_fingerprint({**filters, "SortBy": sort_key.value, "SortOrder": order})
    page = PageRequest(
        sort_key=sort_key,
        descending=order == "Descending",
        limit=max_results or default_max_results,
        cursor=decode_next_token(next_token, fingerprint),
    )
    return page, fingerprint
