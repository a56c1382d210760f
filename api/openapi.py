"""The OpenAPI document: FastAPI's, completed with what only the service model knows.

- the schemas of bodies that routes parse themselves (after the signature check);
- the constraints (ranges, lengths, patterns, enums) of query and path parameters, taken
  from the input shape of the AWS operation a route's summary names, so that clients and
  schemathesis see the same limits the server enforces;
- no 422: FastAPI documents one for every route with parameters, but request errors are
  answered as AWS 400s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from pydantic.json_schema import models_json_schema

from api.rest.common import BODY_MODELS
from core.sagemaker.json_schema import member_constraints
from core.sagemaker.service_model import ServiceModel, sagemaker_service_model


def install_openapi(app: FastAPI) -> None:
    """Wrap ``app.openapi`` so that its (cached) document is completed once."""
    build: Callable[[], dict[str, Any]] = app.openapi
    completed: list[int] = []  # id() of the document FastAPI cached and we completed

    def openapi() -> dict[str, Any]:
        document = build()
        if completed != [id(document)]:
            add_body_schemas(document)
            add_parameter_constraints(document, sagemaker_service_model())
            drop_fastapi_validation_errors(document)
            completed[:] = [id(document)]
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def add_body_schemas(document: dict[str, Any]) -> None:
    """Add each body model's schema, and the models it refers to, under components.schemas."""
    _, top = models_json_schema(
        [(model, "validation") for model in dict.fromkeys(BODY_MODELS)],
        ref_template="#/components/schemas/{model}",
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in top.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    document["components"]["schemas"] = dict(sorted(schemas.items()))


def add_parameter_constraints(document: dict[str, Any], model: ServiceModel) -> None:
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            shape_name = _input_shape(operation.get("summary", ""), model)
            if shape_name is None:
                continue
            members = model.members(shape_name)
            for parameter in operation.get("parameters", []):
                member = _member_for(parameter, shape_name, model)
                if member is not None:
                    _constrain(parameter["schema"], member_constraints(model.shape(members[member])))


def drop_fastapi_validation_errors(document: dict[str, Any]) -> None:
    """No route answers FastAPI's 422: its request errors become AWS 400s (error_responses.py)."""
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            operation.get("responses", {}).pop("422", None)
    components = document.get("components", {})
    schemas = components.get("schemas", {})
    fastapi_only = ("HTTPValidationError", "ValidationError")
    rest = {name: schema for name, schema in schemas.items() if name not in fastapi_only}
    remaining = json.dumps({**document, "components": {**components, "schemas": rest}})
    for name in fastapi_only:
        if f'"#/components/schemas/{name}"' not in remaining:
            schemas.pop(name, None)


def _input_shape(summary: str, model: ServiceModel) -> str | None:
    """``DescribeOptimizationJob, plus ...`` -> DescribeOptimizationJobRequest."""
    match = re.match(r"[A-Za-z]+", summary)
    if match is None or match.group() not in model.operation_names:
        return None
    return model.input_shape_name(match.group())


def _member_for(parameter: dict[str, Any], shape_name: str, model: ServiceModel) -> str | None:
    name = parameter.get("name", "")
    members = model.members(shape_name)
    if parameter.get("in") == "query":
        return name if name in members else None
    if parameter.get("in") == "path" and name == "name":
        # /{name}: the one required ...Name member (OptimizationJobName, ModelName).
        named = [m for m in model.required_members(shape_name) if m.endswith("Name")]
        return named[0] if len(named) == 1 else None
    return None


def _constrain(schema: dict[str, Any], constraints: dict[str, Any]) -> None:
    """Put the constraints on the non-null branch of ``X | None`` schemas, else on the schema."""
    branches = [branch for branch in schema.get("anyOf", []) if branch.get("type") != "null"]
    for target in branches or [schema]:
        target.update(constraints)
