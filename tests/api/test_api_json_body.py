"""parse_json_body: every unusable body is a SerializationException, whatever it holds."""

from __future__ import annotations

import pytest

from api.json_body import MAX_NESTING_DEPTH, parse_json_body
from core.sagemaker.errors import SerializationException


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested more than"),
        (b"[" * (MAX_NESTING_DEPTH + 1) + b"]" * (MAX_NESTING_DEPTH + 1), "nested more than"),
        (b'{"a": ' * (MAX_NESTING_DEPTH + 1) + b"1" + b"}" * (MAX_NESTING_DEPTH + 1), "nested more than"),
        (b'{"MaxResults": ' + b"9" * 5000 + b"}", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b'{"a": "\\ud800"}', "lone UTF-16 surrogate (\\ud800)"),
        (b'{"\\udfff": 1}', "lone UTF-16 surrogate (\\udfff)"),
        (b'["ok", ["\\ud800x"]]', "lone UTF-16 surrogate"),
        (b'{"a": "x\\u0000y"}', "NUL character (\\u0000)"),
        (b'{"a\\u0000": 1}', "NUL character (\\u0000)"),
        (b'[{"S3Uri": ["s3://b/\\u0000"]}]', "NUL character"),
    ],
)
def test_unusable_bodies(body: bytes, message: str) -> None:
    with pytest.raises(SerializationException) as raised:
        parse_json_body(body)
    assert message in raised.value.message


def test_usable_bodies() -> None:
    assert parse_json_body(b"  ") == {}
    depth = MAX_NESTING_DEPTH
    assert parse_json_body(b"[" * depth + b"]" * depth) is not None
    assert parse_json_body(b'{"Name": "\\ud83d\\ude00"}') == {"Name": "\U0001f600"}  # a valid pair
