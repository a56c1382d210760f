"""Coral-style validation messages, exactly as AWS words them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from core.sagemaker.service_model import sagemaker_service_model
from core.sagemaker.shapes.optimization_jobs import CreateOptimizationJobRequest, ListOptimizationJobsRequest
from core.sagemaker.validation import (
    MAX_RENDERED_VALUE,
    ShapeTypeError,
    ShapeValidator,
    format_violations,
    parse_timestamp,
    render_value,
)
from tests.factories.optimization_jobs import create_optimization_job_request


@pytest.fixture(scope="module")
def validator() -> ShapeValidator:
    return ShapeValidator(sagemaker_service_model())


def message(validator: ShapeValidator, shape: str, value: Any) -> str:
    return format_violations(validator.validate(shape, value))


def test_a_valid_full_request_has_no_violations(validator: ShapeValidator) -> None:
    assert validator.validate("CreateOptimizationJobRequest", create_optimization_job_request()) == []


def test_pattern_violation_reads_like_aws(validator: ShapeValidator) -> None:
    body = create_optimization_job_request(OptimizationJobName="x_y")
    assert message(validator, "CreateOptimizationJobRequest", body) == (
        "1 validation error detected: Value 'x_y' at 'optimizationJobName' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
    )


def test_several_errors_are_counted_and_joined(validator: ShapeValidator) -> None:
    assert message(
        validator, "ListOptimizationJobsRequest", {"MaxResults": 1000, "StatusEquals": "BOGUS"}
    ) == (
        "2 validation errors detected: Value '1000' at 'maxResults' failed to satisfy constraint: "
        "Member must have value less than or equal to 100; Value 'BOGUS' at 'statusEquals' failed to "
        "satisfy constraint: Member must satisfy enum value set: "
        "[INPROGRESS, COMPLETED, FAILED, STARTING, STOPPING, STOPPED]"
    )


def test_missing_required_member_is_null(validator: ShapeValidator) -> None:
    body = create_optimization_job_request()
    del body["RoleArn"]
    assert message(validator, "CreateOptimizationJobRequest", body) == (
        "1 validation error detected: Value null at 'roleArn' failed to satisfy constraint: "
        "Member must not be null"
    )


def test_nested_paths_lists_and_maps(validator: ShapeValidator) -> None:
    body = create_optimization_job_request(
        DeploymentInstanceType="ml.m5.large",
        OutputConfig={"S3OutputLocation": "ftp://x", "SageMakerModel": {"ModelName": "-bad-"}},
        Tags=[{"Key": "ok", "Value": "v"}, {"Key": "", "Value": "#"}],
        VpcConfig={"SecurityGroupIds": ["sg_1", "sg-2"], "Subnets": ["s" * 33]},
        OptimizationEnvironment={"": "x"},
        StoppingCondition={"MaxPendingTimeInSeconds": 60},
    )
    text = message(validator, "CreateOptimizationJobRequest", body)
    assert text.startswith("9 validation errors detected: ")
    expected_parts = [
        "Value 'ml.m5.large' at 'deploymentInstanceType' failed to satisfy constraint: "
        "Member must satisfy enum value set: [ml.p4d.24xlarge,",
        "Value '{=x}' at 'optimizationEnvironment' failed to satisfy constraint: Map keys must satisfy "
        "constraint: [Member must satisfy regular expression pattern: ^(?!\\s*$).+$]",
        "Value 'ftp://x' at 'outputConfig.s3OutputLocation' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)$",
        "Value '-bad-' at 'outputConfig.sageMakerModel.modelName'",
        "Value '60' at 'stoppingCondition.maxPendingTimeInSeconds' failed to satisfy constraint: "
        "Member must have value greater than or equal to 1800",
        "Value '' at 'tags.2.member.key' failed to satisfy constraint: "
        "Member must have length greater than or equal to 1",
        "Value '#' at 'tags.2.member.value' failed to satisfy constraint: Member must satisfy regular "
        "expression pattern: ^([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)$",
        "Value '[sg_1, sg-2]' at 'vpcConfig.securityGroupIds' failed to satisfy constraint: Member must "
        "satisfy constraint: [Member must satisfy regular expression pattern: ^[-0-9a-zA-Z]+$]",
        "at 'vpcConfig.subnets' failed to satisfy constraint: Member must satisfy constraint: "
        "[Member must have length less than or equal to 32]",
    ]
    for part in expected_parts:
        assert part in text


def test_unicode_letters_are_valid_in_tags(validator: ShapeValidator) -> None:
    body = create_optimization_job_request(Tags=[{"Key": "équipe", "Value": "機械学習 team"}])
    assert validator.validate("CreateOptimizationJobRequest", body) == []


def test_union_needs_exactly_one_member(validator: ShapeValidator) -> None:
    body = create_optimization_job_request(OptimizationConfigs=[{}])
    assert "at 'optimizationConfigs.1.member' failed to satisfy constraint: Member must have exactly one" in (
        message(validator, "CreateOptimizationJobRequest", body)
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"MaxResults": "ten"}, "STRING_VALUE can not be converted to an Integer at 'maxResults'"),
        ({"MaxResults": True}, "BOOLEAN_VALUE can not be converted to an Integer at 'maxResults'"),
        ({"NameContains": 5}, "NUMBER_VALUE can not be converted to a String at 'nameContains'"),
        ({"CreationTimeAfter": "yesterday"}, "STRING_VALUE can not be converted to a Timestamp"),
        ([1, 2], "START_ARRAY can not be converted to a structure at the top level of the request body"),
    ],
)
def test_wrong_json_types_are_serialization_errors(
    validator: ShapeValidator, body: Any, expected: str
) -> None:
    with pytest.raises(ShapeTypeError) as raised:
        validator.validate("ListOptimizationJobsRequest", body)
    assert expected in str(raised.value)


def test_timestamps_accept_epoch_and_iso(validator: ShapeValidator) -> None:
    for value in (1735689600, 1735689600.5, "1735689600", "2025-01-01T00:00:00Z"):
        request = ListOptimizationJobsRequest.model_validate({"CreationTimeAfter": value})
        assert request.creation_time_after is not None
        assert request.creation_time_after.year in (2025, 2024)


def test_values_render_like_java() -> None:
    assert render_value(None) == "null"
    assert render_value(True) == "'true'"
    assert render_value(["a", 1]) == "'[a, 1]'"
    assert render_value({"k": "v"}) == "'{k=v}'"


def test_request_models_run_the_same_validation() -> None:
    with pytest.raises(ValidationError) as raised:
        CreateOptimizationJobRequest.model_validate(create_optimization_job_request(MaxInstanceCount=0))
    (error,) = raised.value.errors()
    assert error["type"] == "aws_error"
    assert error["ctx"]["aws_code"] == "ValidationException"
    assert "Value '0' at 'maxInstanceCount'" in error["ctx"]["aws_message"]


@pytest.mark.parametrize(
    "value",
    [
        1e20,
        -1e20,
        10**30,
        "1e20",
        "-1e300",
        float("inf"),
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
    ],
)
def test_timestamps_outside_what_datetime_holds_are_serialization_errors(
    validator: ShapeValidator, value: Any
) -> None:
    with pytest.raises(ShapeTypeError, match="can not be converted to a Timestamp"):
        validator.validate("ListOptimizationJobsRequest", {"CreationTimeAfter": value})
    assert parse_timestamp(value) is None


@pytest.mark.parametrize(("value", "limit"), [(2**31, "2147483647"), (10**401, "2147483647")])
def test_integers_beyond_java_int_are_violations(validator: ShapeValidator, value: int, limit: str) -> None:
    body = create_optimization_job_request(StoppingCondition={"MaxRuntimeInSeconds": value})
    text = message(validator, "CreateOptimizationJobRequest", body)
    assert text.startswith("1 validation error detected: Value '")
    assert text.endswith(
        "at 'stoppingCondition.maxRuntimeInSeconds' failed to satisfy constraint: "
        f"Member must have value less than or equal to {limit}"
    )
    assert (
        validator.validate(
            "CreateOptimizationJobRequest",
            create_optimization_job_request(StoppingCondition={"MaxRuntimeInSeconds": 2**31 - 1}),
        )
        == []
    )


def test_huge_values_are_cut_in_messages() -> None:
    assert render_value("a" * MAX_RENDERED_VALUE) == f"'{'a' * MAX_RENDERED_VALUE}'"
    rendered = render_value("a" * 10_000_000)
    assert rendered == f"'{'a' * MAX_RENDERED_VALUE}...' (10000000 characters)"
