"""CloudWatch Logs term filter patterns and page tokens."""

from __future__ import annotations

import pytest

from core.logs.errors import InvalidParameterException
from core.logs.filter_pattern import parse_filter_pattern
from core.logs.tokens import decode_position, encode_page_token, parse_stream_token


@pytest.mark.parametrize(
    ("pattern", "message", "matches"),
    [
        ("", "anything", True),
        ("ERROR", "stage 3: ERROR boom", True),
        ("ERROR", "stage 3: error boom", False),  # case-sensitive, as on AWS
        ("ERROR boom", "boom ... ERROR", True),  # every term, in any order
        ('"ERROR boom"', "boom ... ERROR", False),  # a quoted phrase is one term
        ('"say \\"hi\\""', 'they say "hi"', True),
        ("?ERROR ?WARN", "WARN disk", True),
        ("?ERROR ?WARN", "INFO ok", False),
        ("ERROR -retry", "ERROR, retry later", False),
        ("ERROR -retry", "ERROR, giving up", True),
    ],
)
def test_term_patterns(pattern: str, message: str, matches: bool) -> None:
    assert parse_filter_pattern(pattern).matches(message) is matches


@pytest.mark.parametrize("pattern", ['{ $.level = "ERROR" }', "[ip, user, ...]", "%ERR.R%"])
def test_structured_and_regex_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(InvalidParameterException, match="supports term patterns only"):
        parse_filter_pattern(pattern)


def test_tokens_round_trip_and_reject_tampering() -> None:
    token = encode_page_token("events", [1700000000000, 42])
    assert decode_position(token, "events") == (1700000000000, 42)
    for bad in (
        "garbage",
        token[:-3],
        encode_page_token("groups", [1, 2]),
        encode_page_token("events", ["1", 2]),
    ):
        with pytest.raises(InvalidParameterException, match=r"The specified nextToken is invalid\."):
            decode_position(bad, "events")
    assert parse_stream_token("b/17/3") == ("b", (17, 3))
    with pytest.raises(InvalidParameterException):
        parse_stream_token("x/17/3")
