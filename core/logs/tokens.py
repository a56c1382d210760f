"""Page tokens of the Logs operations: opaque to clients, checked strictly when they come back."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from core.logs.errors import InvalidParameterException

INVALID_TOKEN = "The specified nextToken is invalid."
Position = tuple[int, int]


def encode_page_token(kind: str, value: Any) -> str:
    raw = json.dumps([kind, value], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_page_token(token: str | None, kind: str) -> Any:
    """The value ``encode_page_token(kind, value)`` wrapped; None for no token."""
    if token is None:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidParameterException(INVALID_TOKEN) from None
    if not isinstance(decoded, list) or len(decoded) != 2 or decoded[0] != kind:
        raise InvalidParameterException(INVALID_TOKEN)
    return decoded[1]


def decode_position(token: str | None, kind: str) -> Position | None:
    value = decode_page_token(token, kind)
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2 and all(type(part) is int for part in value)):
        raise InvalidParameterException(INVALID_TOKEN)
    return value[0], value[1]


def stream_token(direction: str, position: Position) -> str:
    """GetLogEvents' ``f/<timestamp>/<id>`` (events after) and ``b/<timestamp>/<id>`` (before)."""
    return f"{direction}/{position[0]}/{position[1]}"


def parse_stream_token(token: str) -> tuple[str, Position]:
    direction, _, rest = token.partition("/")
    timestamp, _, event_id = rest.partition("/")
    try:
        position = (int(timestamp), int(event_id))
    except ValueError:
        raise InvalidParameterException(INVALID_TOKEN) from None
    if direction not in ("f", "b"):
        raise InvalidParameterException(INVALID_TOKEN)
    return direction, position
