"""The committed subset of SageMaker's service model (see botocore_subset.py)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

SHAPES_FILE = Path(__file__).with_name("sagemaker_shapes.json")


class ServiceModel:
    """Read-only access to operations and shapes by name."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.metadata: dict[str, Any] = document["metadata"]
        self._operations: dict[str, Any] = document["operations"]
        self._shapes: dict[str, Any] = document["shapes"]

    @property
    def operation_names(self) -> frozenset[str]:
        return frozenset(self._operations)

    def shape(self, name: str) -> dict[str, Any]:
        return dict(self._shapes[name])

    def input_shape_name(self, operation: str) -> str | None:
        spec = self._operations[operation].get("input")
        return None if spec is None else str(spec["shape"])

    def output_shape_name(self, operation: str) -> str | None:
        spec = self._operations[operation].get("output")
        return None if spec is None else str(spec["shape"])

    def error_shape_names(self, operation: str) -> list[str]:
        return [str(error["shape"]) for error in self._operations[operation].get("errors", [])]

    def enum_values(self, shape_name: str) -> tuple[str, ...]:
        return tuple(self._shapes[shape_name]["enum"])

    def members(self, shape_name: str) -> dict[str, str]:
        """Member name -> member shape name of a structure, in declaration order."""
        return {name: spec["shape"] for name, spec in self._shapes[shape_name]["members"].items()}

    def required_members(self, shape_name: str) -> frozenset[str]:
        return frozenset(self._shapes[shape_name].get("required", []))


@lru_cache(maxsize=1)
def sagemaker_service_model() -> ServiceModel:
    return ServiceModel(json.loads(SHAPES_FILE.read_text(encoding="utf-8")))
