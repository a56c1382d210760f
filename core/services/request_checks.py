"""Checks that go beyond the service model's constraints, worded like AWS's validation errors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from core.sagemaker.errors import ValidationException
from core.sagemaker.shapes.common import Tag
from core.sagemaker.validation import ConstraintViolation

# AWS's own tag keys start with this (case-insensitively); no request may set or delete one.
RESERVED_TAG_KEY_PREFIX = "aws:"


def require_valid_tags(tags: Sequence[Tag] | None) -> None:
    """The Tags member of AddTags and every Create*: unique keys, none of them AWS's own."""
    require_unique_tag_keys(tags)
    require_user_tag_keys([tag.key for tag in tags or []], "tags.{}.member.key")


def require_user_tag_keys(keys: Sequence[str], path: str) -> None:
    """``path`` formats a 1-based index into the member path (``tags.{}.member.key``)."""
    violations = [
        ConstraintViolation(
            path.format(index),
            key,
            f"Member must not start with the reserved prefix '{RESERVED_TAG_KEY_PREFIX}'",
        )
        for index, key in enumerate(keys, start=1)
        if key.lower().startswith(RESERVED_TAG_KEY_PREFIX)
    ]
    if violations:
        raise ValidationException.from_violations(violations)


def require_unique_tag_keys(tags: Sequence[Tag] | None) -> None:
    keys = Counter(tag.key for tag in tags or [])
    duplicated = sorted(key for key, count in keys.items() if count > 1)
    if duplicated:
        raise ValidationException.for_member(
            "tags",
            [f"{tag.key}={tag.value}" for tag in tags or []],
            f"Member must have unique tag keys; duplicated: {', '.join(duplicated)}",
        )


def require_s3_uri(uri: str | None, path: str) -> str:
    """eaglenest reads and writes S3 through the S3 API, so only ``s3://bucket/...`` URIs work."""
    if not uri or not uri.startswith("s3://") or len(uri) <= len("s3://") or uri[5] == "/":
        raise ValidationException.for_member(
            path, uri, "Member must be an s3://bucket/prefix URI (this deployment reads and writes S3 only)"
        )
    return uri
