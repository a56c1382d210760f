"""The AWS JSON 1.1 protocol: routing by X-Amz-Target, error shapes, request ids, serialisation."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.api.signed_http import call_operation
from tests.factories.accounts import AccountCredentials
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.fixtures.live_server import LiveServer


def aws_error(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    assert set(body) == {"__type", "message"}
    assert response.headers["x-amzn-errortype"] == body["__type"]
    return response.status_code, body["__type"], body["message"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "SageMaker.CreateTrainingJob",
            "Unknown operation 'SageMaker.CreateTrainingJob'. This service implements: ",
        ),
        ("DynamoDB_20120810.ListTables", "Unknown operation 'DynamoDB_20120810.ListTables'."),
        (None, "The request has no X-Amz-Target header; expected 'SageMaker.<Operation>'."),
    ],
)
def test_unknown_operations(
    live_server: LiveServer, account: AccountCredentials, target: str | None, message: str
) -> None:
    status, code, text = aws_error(call_operation(live_server.url, account, target))
    assert (status, code) == (400, "UnknownOperationException")
    assert text.startswith(message)


def test_unparsable_body_is_a_serialization_error(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    status, code, text = aws_error(call_operation(live_server.url, account, "ListModels", b"{not json"))
    assert (status, code) == (400, "SerializationException")
    assert text.startswith(
        "The request body is not valid JSON: Expecting property name enclosed in double quotes"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"MaxResults": "10"}, "STRING_VALUE can not be converted to an Integer at 'maxResults'"),
        ({"NameContains": ["a"]}, "START_ARRAY can not be converted to a String at 'nameContains'"),
        (b"[]", "START_ARRAY can not be converted to a structure at the top level of the request body"),
    ],
)
def test_wrong_json_types_are_serialization_errors(
    live_server: LiveServer, account: AccountCredentials, body: Any, message: str
) -> None:
    assert aws_error(call_operation(live_server.url, account, "ListOptimizationJobs", body)) == (
        400,
        "SerializationException",
        message,
    )


def test_empty_body_and_unknown_members_are_accepted(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    assert call_operation(live_server.url, account, "ListModels", b"").json() == {"Models": []}
    response = call_operation(live_server.url, account, "ListModels", {"FutureMember": 1, "MaxResults": 5})
    assert response.status_code == 200


def test_responses_carry_request_ids_numbers_for_times_and_no_nulls(
    live_server: LiveServer, account: AccountCredentials, sagemaker: Any
) -> None:
    body = create_optimization_job_request(RoleArn=account.role_arn)
    del body["VpcConfig"], body["MaxInstanceCount"], body["OptimizationEnvironment"]
    created = call_operation(live_server.url, account, "CreateOptimizationJob", body)
    assert created.status_code == 200
    assert created.headers["content-type"] == "application/x-amz-json-1.1"
    assert created.headers["x-amzn-requestid"]
    raw = call_operation(
        live_server.url,
        account,
        "DescribeOptimizationJob",
        {"OptimizationJobName": body["OptimizationJobName"]},
    )
    described = raw.json()
    assert isinstance(described["CreationTime"], float)
    assert isinstance(described["LastModifiedTime"], float)
    assert "null" not in raw.text
    for absent in ("VpcConfig", "MaxInstanceCount", "OptimizationEnvironment", "OptimizationStartTime"):
        assert absent not in described

    via_boto = sagemaker.describe_optimization_job(OptimizationJobName=body["OptimizationJobName"])
    request_id = via_boto["ResponseMetadata"]["RequestId"]
    assert len(request_id) == 36
    stopped = call_operation(
        live_server.url, account, "StopOptimizationJob", {"OptimizationJobName": body["OptimizationJobName"]}
    )
    assert (stopped.status_code, json.loads(stopped.text)) == (200, {})
