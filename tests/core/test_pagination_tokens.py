"""NextTokens: signed, bound to one account's query, and refused whole when altered."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest

from core.sagemaker.errors import ValidationException
from core.services.pagination import TokenScope, decode_next_token, encode_next_token
from db.queries.listing import PageCursor

CURSOR = PageCursor(sort_value="2026-11-25T10:00:00+00:00", row_id=42)
SCOPE = TokenScope("0123456789abcdef", account_id=7)


def test_a_token_round_trips_for_its_own_query() -> None:
    token = encode_next_token(CURSOR, SCOPE)
    assert token is not None
    assert decode_next_token(token, SCOPE) == CURSOR
    assert encode_next_token(None, SCOPE) is None
    assert decode_next_token(None, SCOPE) is None


def test_another_account_cannot_use_it() -> None:
    token = encode_next_token(CURSOR, SCOPE)
    with pytest.raises(ValidationException, match=r"^Invalid NextToken"):
        decode_next_token(token, TokenScope(SCOPE.fingerprint, account_id=8))


def test_other_filters_are_named_as_the_reason() -> None:
    token = encode_next_token(CURSOR, SCOPE)
    with pytest.raises(ValidationException, match="issued for a request with different filters"):
        decode_next_token(token, TokenScope("fedcba9876543210", account_id=7))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@pytest.mark.parametrize(
    "forge",
    [
        # The cursor changed, the signature kept: what a client would do to reach other rows.
        lambda payload, mac: (
            _b64(json.dumps({"v": "x", "i": 10**30, "q": SCOPE.fingerprint}).encode()) + "." + mac
        ),
        lambda payload, mac: payload,  # unsigned
        lambda payload, mac: payload + "." + mac[:-2],  # truncated signature
        lambda payload, mac: payload + "." + "A" * len(mac),
        lambda payload, mac: "é." + mac,  # not ASCII
        lambda payload, mac: "%%%.%%%",
    ],
)
def test_altered_tokens_are_invalid(forge: Callable[[str, str], str]) -> None:
    token = encode_next_token(CURSOR, SCOPE)
    assert token is not None
    payload, _, mac = token.partition(".")
    forged = forge(payload, mac)
    with pytest.raises(ValidationException, match=r"^Invalid NextToken"):
        decode_next_token(forged, SCOPE)
