"""Opaque NextToken values for the List* operations.

A token carries the keyset cursor (last row's sort value and id) plus a fingerprint of
the filters and sort order it was issued for, so a token replayed with different
parameters is refused instead of silently returning a wrong page. It is signed with a
key derived from EAGLENEST_SECRET_KEY and the caller's account, so a client cannot forge
a cursor (whose values reach the keyset query) nor replay another account's token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from core.sagemaker.errors import ValidationException
from db.queries.listing import PageCursor
from db.settings import get_settings

MAX_TOKEN_LENGTH = 8192
_MAC_BYTES = 16  # 128 bits: forging one is as hard as guessing the key


@dataclass(frozen=True)
class TokenScope:
    """What a NextToken is bound to: one account's query with these filters and this order."""

    fingerprint: str
    account_id: int


def query_fingerprint(parameters: dict[str, Any]) -> str:
    canonical = json.dumps(parameters, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def encode_next_token(cursor: PageCursor | None, scope: TokenScope) -> str | None:
    if cursor is None:
        return None
    document = json.dumps(
        {"v": cursor.sort_value, "i": cursor.row_id, "q": scope.fingerprint}, separators=(",", ":")
    ).encode()
    return f"{_b64encode(document)}.{_b64encode(_mac(document, scope.account_id))}"


def decode_next_token(token: str | None, scope: TokenScope) -> PageCursor | None:
    """The cursor inside ``token``; ValidationException when it is not one of ours for this query."""
    if not token:
        return None
    invalid = ValidationException(f"Invalid NextToken '{token[:MAX_TOKEN_LENGTH]}'.")
    payload, _, mac = token.partition(".")
    try:
        document = _b64decode(payload)
        valid = hmac.compare_digest(_b64decode(mac), _mac(document, scope.account_id))
    except (binascii.Error, ValueError):
        raise invalid from None
    if not valid:
        raise invalid
    try:
        parsed = json.loads(document)
        cursor = PageCursor(sort_value=str(parsed["v"]), row_id=int(parsed["i"]))
        issued_for = parsed["q"]
    except (ValueError, KeyError, TypeError):
        # Only a token we signed gets here, so this means a change of format, not an attack.
        raise invalid from None
    if issued_for != scope.fingerprint:
        raise ValidationException(
            "The NextToken was issued for a request with different filters or sort order; "
            "repeat the request with the parameters it was issued for, or start again without NextToken."
        )
    return cursor


def _mac(document: bytes, account_id: int) -> bytes:
    key = _token_key(get_settings().secret_key.get_secret_value(), account_id)
    return hmac.new(key, document, hashlib.sha256).digest()[:_MAC_BYTES]


def _token_key(secret: str, account_id: int) -> bytes:
    # A key of its own (not the secret itself, which also encrypts stored access keys),
    # one per account so that a token means nothing to any other account.
    return hmac.new(
        secret.encode(), f"eaglenest NextToken v1 account {account_id}".encode(), "sha256"
    ).digest()


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode((text + "=" * (-len(text) % 4)).encode("ascii"))
