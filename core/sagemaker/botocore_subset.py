"""Cut the part of botocore's SageMaker service model that eaglenest serves.

The server validates requests against a committed, reviewed copy of these shapes
(``sagemaker_shapes.json``) instead of reading botocore's data at run time, so a client
library upgrade can never silently change what the server accepts. A test regenerates
the subset from the installed botocore and fails when the two differ.
"""

from __future__ import annotations

from typing import Any

SERVED_OPERATIONS = (
    "AddTags",
    "DeleteTags",
    "ListTags",
    "CreateModel",
    "DeleteModel",
    "DescribeModel",
    "ListModels",
    "CreateOptimizationJob",
    "DeleteOptimizationJob",
    "DescribeOptimizationJob",
    "ListOptimizationJobs",
    "StopOptimizationJob",
    "CreateEndpointConfig",
    "DeleteEndpointConfig",
    "DescribeEndpointConfig",
    "ListEndpointConfigs",
    "CreateEndpoint",
    "DeleteEndpoint",
    "DescribeEndpoint",
    "ListEndpoints",
    "UpdateEndpoint",
)

_DROPPED_KEYS = frozenset({"documentation", "documentationUrl"})


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _strip(value) for key, value in node.items() if key not in _DROPPED_KEYS}
    if isinstance(node, list):
        return [_strip(item) for item in node]
    return node


def _referenced_shapes(shape: dict[str, Any]) -> list[str]:
    if shape["type"] == "structure":
        return [member["shape"] for member in shape["members"].values()]
    if shape["type"] == "list":
        return [shape["member"]["shape"]]
    if shape["type"] == "map":
        return [shape["key"]["shape"], shape["value"]["shape"]]
    return []


def extract_subset(service_model: dict[str, Any]) -> dict[str, Any]:
    """The metadata, served operations and every shape they reach, without documentation."""
    operations = {name: service_model["operations"][name] for name in SERVED_OPERATIONS}
    pending: list[str] = []
    for operation in operations.values():
        for key in ("input", "output"):
            if key in operation:
                pending.append(operation[key]["shape"])
        pending.extend(error["shape"] for error in operation.get("errors", []))
    shapes: dict[str, Any] = {}
    while pending:
        name = pending.pop()
        if name in shapes:
            continue
        shapes[name] = service_model["shapes"][name]
        pending.extend(_referenced_shapes(shapes[name]))
    metadata_keys = ("apiVersion", "jsonVersion", "protocol", "serviceId", "signingName", "targetPrefix")
    subset: dict[str, Any] = _strip(
        {
            "metadata": {key: service_model["metadata"][key] for key in metadata_keys},
            "operations": operations,
            "shapes": dict(sorted(shapes.items())),
        }
    )
    return subset
