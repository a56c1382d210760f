"""Opaque NextToken values for the List* operations.

A token carries the keyset cursor (last row's sort value and id) plus a fingerprint of
the filters and sort order it was issued for, so a token replayed with different
parameters is refused instead of silently returning a wrong page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from core.sagemaker.errors import ValidationException
from db.queries.listing import PageCursor

MAX_TOKEN_LENGTH = 8192


def query_fingerprint(parameters: dict[str, Any]) -> str:
    canonical = json.dumps(parameters, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def encode_next_token(cursor: PageCursor | None, fingerprint: str) -> str | None:
    if cursor is None:
        return None
    document = json.dumps(
        {"v": cursor.sort_value, "i": cursor.row_id, "q": fingerprint}, separators=(",", ":")
    )
    return base64.urlsafe_b64encode(document.encode()).decode().rstrip("=")


def decode_next_token(token: str | None, fingerprint: str) -> PageCursor | None:
    """The cursor inside ``token``; ValidationException when it is not one of ours for this query."""
    if not token:
        return None
    try:
        padded = token + "=" * (-len(token) % 4)
        document = json.loads(base64.urlsafe_b64decode(padded.encode()))
        cursor = PageCursor(sort_value=str(document["v"]), row_id=int(document["i"]))
        issued_for = document["q"]
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ValidationException(f"Invalid NextToken '{token}'.") from None
    if issued_for != fingerprint:
        raise ValidationException(
            "The NextToken was issued for a request with different filters or sort order; "
            "repeat the request with the parameters it was issued for, or start again without NextToken."
        )
    return cursor
