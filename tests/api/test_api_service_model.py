"""The committed service-model subset and the pydantic shapes agree with the installed botocore."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import botocore
import pytest
from pydantic import BaseModel

from api.operations.registry import REGISTRY
from core.sagemaker.botocore_subset import SERVED_OPERATIONS, extract_subset
from core.sagemaker.service_model import SHAPES_FILE, sagemaker_service_model
from core.sagemaker.shapes import (
    common,
    endpoint_configs,
    endpoints,
    optimization_jobs,
    sagemaker_models,
    tags,
)
from core.sagemaker.shapes.base import AwsRequest

BOTOCORE_MODEL = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"

# Pydantic classes that stand for a botocore shape with another name (same members).
SHAPE_ALIASES: dict[str, type[BaseModel]] = {
    "OptimizationVpcConfig": common.VpcConfig,
    "ModelQuantizationConfig": optimization_jobs.ModelOptimizationContainerConfig,
    "ModelCompilationConfig": optimization_jobs.ModelOptimizationContainerConfig,
    "ModelShardingConfig": optimization_jobs.ModelOptimizationContainerConfig,
}


@pytest.fixture(scope="module")
def botocore_model() -> dict[str, Any]:
    with gzip.open(BOTOCORE_MODEL, "rt", encoding="utf-8") as handle:
        document: dict[str, Any] = json.load(handle)
    return document


def test_committed_subset_is_what_botocore_ships(botocore_model: dict[str, Any]) -> None:
    committed = json.loads(SHAPES_FILE.read_text(encoding="utf-8"))
    assert committed == extract_subset(botocore_model), (
        "botocore's SageMaker model changed: run scripts/extract_sagemaker_shapes.py and review the diff"
    )


def test_every_served_operation_has_a_handler() -> None:
    assert sorted(REGISTRY.names) == sorted(SERVED_OPERATIONS)


def _pydantic_class_for(shape_name: str) -> type[BaseModel]:
    if shape_name in SHAPE_ALIASES:
        return SHAPE_ALIASES[shape_name]
    for module in (sagemaker_models, optimization_jobs, endpoint_configs, endpoints, tags, common):
        found = getattr(module, shape_name, None)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    raise AssertionError(f"no pydantic class for botocore shape {shape_name}")


def _structures_reachable_from_operations() -> set[str]:
    model = sagemaker_service_model()
    pending = []
    for operation in SERVED_OPERATIONS:
        pending += [
            name for name in (model.input_shape_name(operation), model.output_shape_name(operation)) if name
        ]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        shape = model.shape(name)
        if shape["type"] == "structure":
            pending += list(model.members(name).values())
        elif shape["type"] == "list":
            pending.append(shape["member"]["shape"])
        elif shape["type"] == "map":
            pending.append(shape["value"]["shape"])
    return {name for name in seen if model.shape(name)["type"] == "structure"}


@pytest.mark.parametrize("shape_name", sorted(_structures_reachable_from_operations()))
def test_pydantic_shape_has_exactly_botocores_members(shape_name: str) -> None:
    model = sagemaker_service_model()
    cls = _pydantic_class_for(shape_name)
    aliases = {field.alias: field for field in cls.model_fields.values()}
    expected = model.members(shape_name)
    # REST detail classes add members; the AWS shapes themselves must match exactly.
    assert set(aliases) == set(expected), f"{cls.__name__} members differ from botocore's {shape_name}"
    for member in model.required_members(shape_name):
        assert aliases[member].is_required(), f"{shape_name}.{member} is required in botocore"
    if issubclass(cls, AwsRequest):
        assert cls.aws_shape == shape_name


def test_instance_type_enum_comes_from_botocore() -> None:
    values = sagemaker_service_model().enum_values("OptimizationJobDeploymentInstanceType")
    assert "ml.p5.48xlarge" in values
    assert "ml.g6e.48xlarge" in values
    assert len(values) >= 42
