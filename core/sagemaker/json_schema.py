"""Copy the service model's member constraints into a pydantic-generated JSON schema (OpenAPI)."""

from __future__ import annotations

from typing import Any

from core.sagemaker.service_model import sagemaker_service_model
from core.sagemaker.validation import display_pattern

_STRING_KEYS = {"min": "minLength", "max": "maxLength"}
_NUMBER_KEYS = {"min": "minimum", "max": "maximum"}
_LIST_KEYS = {"min": "minItems", "max": "maxItems"}
_MAP_KEYS = {"min": "minProperties", "max": "maxProperties"}


def member_constraints(shape: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema keywords for one member's shape (nothing for structures: they have their own)."""
    kind = shape["type"]
    names = {
        "string": _STRING_KEYS,
        "integer": _NUMBER_KEYS,
        "long": _NUMBER_KEYS,
        "float": _NUMBER_KEYS,
        "double": _NUMBER_KEYS,
        "list": _LIST_KEYS,
        "map": _MAP_KEYS,
    }.get(kind, {})
    constraints = {names[key]: shape[key] for key in ("min", "max") if key in shape and key in names}
    if kind == "string" and "pattern" in shape:
        constraints["pattern"] = display_pattern(shape["pattern"])
    if kind == "string" and "enum" in shape:
        constraints["enum"] = list(shape["enum"])
    return constraints


def add_service_model_constraints(schema: dict[str, Any], shape_name: str) -> None:
    """Annotate ``schema``'s properties in place; shapes the model does not know are left alone."""
    model = sagemaker_service_model()
    try:
        members = model.members(shape_name)
    except KeyError:
        return
    for member, member_shape in members.items():
        prop = schema.get("properties", {}).get(member)
        if prop is None:
            continue
        prop.update(member_constraints(model.shape(member_shape)))
