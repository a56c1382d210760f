"""Validate a JSON request against the service model and word failures the way AWS (Coral) does.

botocore checks only required members, types, minimums and unions before sending; it
never checks maxima, patterns or enums, so the server must. Messages follow AWS:

    2 validation errors detected: Value 'x_y' at 'optimizationJobName' failed to satisfy
    constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$;
    Value '1000' at 'maxResults' failed to satisfy constraint: Member must have value less
    than or equal to 100

Member paths are lower-camel (``outputConfig.s3OutputLocation``); list elements that are
structures are addressed ``tags.2.member.key`` (1-based). A value of the wrong JSON type
is not a constraint violation but a SerializationException, as in AWS.
"""

from __future__ import annotations

import math
from collections.abc import Sized
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import regex

from core.sagemaker.service_model import ServiceModel


@dataclass(frozen=True)
class ConstraintViolation:
    path: str
    value: Any
    constraint: str

    def render(self) -> str:
        value = render_value(self.value)
        return f"Value {value} at '{self.path}' failed to satisfy constraint: {self.constraint}"


class ShapeTypeError(Exception):
    """A member holds a JSON value of the wrong type (AWS answers SerializationException)."""

    def __init__(self, path: str, value: Any, expected: str) -> None:
        where = f"'{path}'" if path else "the top level of the request body"
        super().__init__(f"{_json_token(value)} can not be converted to {expected} at {where}")


def format_violations(violations: list[ConstraintViolation]) -> str:
    count = len(violations)
    noun = "error" if count == 1 else "errors"
    return f"{count} validation {noun} detected: " + "; ".join(v.render() for v in violations)


# A value longer than this is cut in messages: a 10 MB name broken two ways must not
# make a 20 MB error. AWS echoes values whole; the longest a SageMaker shape allows is
# 2048 characters (ARNs), so any value a client could mean is still shown in full.
MAX_RENDERED_VALUE = 4096


def render_value(value: Any) -> str:
    """Values appear as Java's toString() would print them: null bare, anything else quoted."""
    if value is None:
        return "null"
    text = _java_text(value)
    if len(text) <= MAX_RENDERED_VALUE:
        return f"'{text}'"
    return f"'{text[:MAX_RENDERED_VALUE]}...' ({len(text)} characters)"


def _java_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_java_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}={_java_text(item)}" for key, item in value.items()) + "}"
    if value is None:
        return "null"
    return str(value)


def _json_token(value: Any) -> str:
    # Jackson's token names, which is how AWS's own serialization errors describe values.
    if isinstance(value, bool):
        return "BOOLEAN_VALUE"
    if isinstance(value, int | float):
        return "NUMBER_VALUE"
    if isinstance(value, str):
        return "STRING_VALUE"
    if isinstance(value, list):
        return "START_ARRAY"
    if isinstance(value, dict):
        return "START_OBJECT"
    return "NULL_VALUE"


def lower_camel(member: str) -> str:
    return member[:1].lower() + member[1:]


def display_pattern(pattern: str) -> str:
    """AWS documents patterns anchored; botocore stores them bare. Show the anchored form."""
    start = "" if pattern.startswith("^") else "^"
    end = "" if pattern.endswith("$") else "$"
    return f"{start}{pattern}{end}"


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> regex.Pattern[str]:
    # The `regex` module: patterns use \p{L}, \p{Z}, \p{N} which `re` does not know.
    return regex.compile(pattern)


def parse_timestamp(value: Any) -> datetime | None:
    """Epoch seconds (number or numeric string) or ISO-8601, as botocore may send; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _from_epoch(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            pass
        else:
            return _from_epoch(number)
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            return parsed.replace(tzinfo=UTC)
        try:
            # 0001-01-01T00:00:00+01:00 is a valid ISO date whose UTC instant is not.
            return parsed.astimezone(UTC)
        except OverflowError:
            return None
    return None


def _from_epoch(seconds: float) -> datetime | None:
    """Epoch seconds as a UTC datetime; None outside what datetime holds (years 1 to 9999)."""
    if isinstance(seconds, float) and not math.isfinite(seconds):
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, ValueError, OSError):
        return None


class ShapeValidator:
    """Walks a value alongside its shape, collecting Coral-style constraint violations."""

    def __init__(self, service_model: ServiceModel) -> None:
        self._model = service_model

    def validate(self, shape_name: str, value: Any) -> list[ConstraintViolation]:
        """Violations of ``value`` against ``shape_name``; raises ShapeTypeError on a wrong type."""
        violations: list[ConstraintViolation] = []
        self._check(shape_name, value, "", violations)
        return violations

    def _check(self, shape_name: str, value: Any, path: str, out: list[ConstraintViolation]) -> None:
        shape = self._model.shape(shape_name)
        kind = shape["type"]
        if kind == "structure":
            self._check_structure(shape_name, shape, value, path, out)
        elif kind == "list":
            self._check_list(shape, value, path, out)
        elif kind == "map":
            self._check_map(shape, value, path, out)
        else:
            out.extend(
                ConstraintViolation(path, value, failure)
                for failure in self._scalar_failures(shape, value, path)
            )

    def _check_structure(
        self, shape_name: str, shape: dict[str, Any], value: Any, path: str, out: list[ConstraintViolation]
    ) -> None:
        if not isinstance(value, dict):
            raise ShapeTypeError(path, value, "a structure")
        required = self._model.required_members(shape_name)
        members = self._model.members(shape_name)
        for member, member_shape in members.items():
            member_path = f"{path}.{lower_camel(member)}" if path else lower_camel(member)
            member_value = value.get(member)
            if member_value is None:
                if member in required:
                    out.append(ConstraintViolation(member_path, None, "Member must not be null"))
                continue
            self._check(member_shape, member_value, member_path, out)
        if shape.get("union"):
            chosen = [member for member in members if value.get(member) is not None]
            if len(chosen) != 1:
                out.append(
                    ConstraintViolation(
                        path,
                        value,
                        "Member must have exactly one of these members set: " + ", ".join(members),
                    )
                )

    def _check_list(
        self, shape: dict[str, Any], value: Any, path: str, out: list[ConstraintViolation]
    ) -> None:
        out.extend(_collection_violations(shape, value, path, expected=list, what="a list"))
        item_shape_name = shape["member"]["shape"]
        item_shape = self._model.shape(item_shape_name)
        if item_shape["type"] in ("structure", "list", "map"):
            for index, item in enumerate(value, start=1):
                item_path = f"{path}.{index}.member"
                if item is None:
                    out.append(ConstraintViolation(item_path, None, "Member must not be null"))
                else:
                    self._check(item_shape_name, item, item_path, out)
            return
        # Scalar elements: AWS reports one violation for the whole list, listing what failed.
        failures = _unique(
            failure
            for index, item in enumerate(value, start=1)
            for failure in self._element_failures(item_shape, item, f"{path}.{index}.member")
        )
        if failures:
            out.append(
                ConstraintViolation(path, value, f"Member must satisfy constraint: [{', '.join(failures)}]")
            )

    def _check_map(
        self, shape: dict[str, Any], value: Any, path: str, out: list[ConstraintViolation]
    ) -> None:
        out.extend(_collection_violations(shape, value, path, expected=dict, what="a map"))
        key_shape = self._model.shape(shape["key"]["shape"])
        value_shape = self._model.shape(shape["value"]["shape"])
        key_failures = _unique(f for key in value for f in self._element_failures(key_shape, key, path))
        value_failures = _unique(
            f
            for key, item in value.items()
            for f in self._element_failures(value_shape, item, f"{path}.{key}")
        )
        if key_failures:
            out.append(
                ConstraintViolation(
                    path, value, f"Map keys must satisfy constraint: [{', '.join(key_failures)}]"
                )
            )
        if value_failures:
            out.append(
                ConstraintViolation(
                    path, value, f"Map value must satisfy constraint: [{', '.join(value_failures)}]"
                )
            )

    def _element_failures(self, shape: dict[str, Any], value: Any, path: str) -> list[str]:
        if value is None:
            return ["Member must not be null"]
        return self._scalar_failures(shape, value, path)

    def _scalar_failures(self, shape: dict[str, Any], value: Any, path: str) -> list[str]:
        kind = shape["type"]
        if kind == "string":
            if not isinstance(value, str):
                raise ShapeTypeError(path, value, "a String")
            failures = _length_failures(shape, len(value))
            if "pattern" in shape and not _compiled(shape["pattern"]).fullmatch(value):
                failures.append(
                    f"Member must satisfy regular expression pattern: {display_pattern(shape['pattern'])}"
                )
            if "enum" in shape and value not in shape["enum"]:
                failures.append(f"Member must satisfy enum value set: [{', '.join(shape['enum'])}]")
            return failures
        if kind in ("integer", "long"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ShapeTypeError(path, value, "an Integer")
            return _range_failures(_JAVA_RANGES[kind] | shape, value)
        if kind in ("float", "double"):
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ShapeTypeError(path, value, "a Double")
            return _range_failures(shape, value)
        if kind == "boolean":
            if not isinstance(value, bool):
                raise ShapeTypeError(path, value, "a Boolean")
            return []
        if kind == "timestamp":
            if parse_timestamp(value) is None:
                raise ShapeTypeError(path, value, "a Timestamp (epoch seconds or ISO-8601)")
            return []
        raise ShapeTypeError(path, value, kind)


# AWS's Integer and Long are Java's 32- and 64-bit types: a shape without its own bounds
# still refuses 10**31 (which would overflow the trainer) as a constraint violation.
_JAVA_RANGES: dict[str, dict[str, int]] = {
    "integer": {"min": -(2**31), "max": 2**31 - 1},
    "long": {"min": -(2**63), "max": 2**63 - 1},
}


def _collection_violations(
    shape: dict[str, Any], value: Any, path: str, *, expected: type[Sized], what: str
) -> list[ConstraintViolation]:
    """A list's or map's own checks: the wrong JSON type raises, a size outside min/max is reported."""
    if not isinstance(value, expected):
        raise ShapeTypeError(path, value, what)
    return [ConstraintViolation(path, value, failure) for failure in _length_failures(shape, len(value))]


def _length_failures(shape: dict[str, Any], length: int) -> list[str]:
    failures = []
    if "min" in shape and length < shape["min"]:
        failures.append(f"Member must have length greater than or equal to {shape['min']}")
    if "max" in shape and length > shape["max"]:
        failures.append(f"Member must have length less than or equal to {shape['max']}")
    return failures


def _range_failures(shape: dict[str, Any], number: float) -> list[str]:
    failures = []
    if "min" in shape and number < shape["min"]:
        failures.append(f"Member must have value greater than or equal to {shape['min']}")
    if "max" in shape and number > shape["max"]:
        failures.append(f"Member must have value less than or equal to {shape['max']}")
    return failures


def _unique(items: Any) -> list[str]:
    return list(dict.fromkeys(items))
