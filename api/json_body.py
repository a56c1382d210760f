"""Parse a request's JSON body the one way both ``POST /`` and the ``/v1`` REST face do.

Anything a client can send that is not a usable JSON document is a SerializationException
(400), never an exception that escapes as a 500: bytes that are not UTF-8, syntax errors,
integers too long for Python to convert, nesting deep enough to exhaust the recursion
limit of the parser or of the validators behind it, strings holding a lone UTF-16
surrogate (``"\\ud800"`` is valid JSON, but no database, S3 key or UTF-8 response can
carry it), and strings holding a NUL (``"\\u0000"``: valid JSON, but Postgres text and JSON
columns refuse it, so a stored request would fail as a 500).
"""

from __future__ import annotations

import json
from typing import Any

from core.sagemaker.errors import SerializationException

# SageMaker's deepest request shape nests about 8 levels; 32 leaves room and keeps every
# recursive walk over the document (validation, error rendering) far from Python's limit.
MAX_NESTING_DEPTH = 32


def parse_json_body(body: bytes) -> Any:
    """The decoded document (``{}`` for an empty body); SerializationException when unusable."""
    if not body.strip():
        return {}
    try:
        document = json.loads(body)
    except RecursionError:
        raise _too_deep() from None
    except (UnicodeDecodeError, ValueError) as error:
        # ValueError covers json.JSONDecodeError and int() refusing more than 4300 digits.
        raise SerializationException(f"The request body is not valid JSON: {error}") from None
    check_document(document)
    return document


def check_document(document: Any) -> None:
    """Refuse nesting beyond MAX_NESTING_DEPTH, lone surrogates and NULs, walking without recursion."""
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            _check_text(value)
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_NESTING_DEPTH:
            raise _too_deep()
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(key)
                pending.append((item, depth + 1))
        else:
            pending.extend((item, depth + 1) for item in value)


def _check_text(text: str) -> None:
    if "\x00" in text:
        raise SerializationException(
            "The request body contains a NUL character (\\u0000) in a string; strings cannot hold one."
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        surrogate = text[error.start].encode("unicode_escape").decode("ascii")
        raise SerializationException(
            f"The request body contains a lone UTF-16 surrogate ({surrogate}) in a string; "
            "strings must be valid Unicode."
        ) from None


def _too_deep() -> SerializationException:
    return SerializationException(
        f"The request body is nested more than {MAX_NESTING_DEPTH} levels deep; "
        "no SageMaker request is nested that deep."
    )
