"""Hostile and malformed input: every request that is not a server fault gets a 4xx in AWS's shape.

Each case here answered ``500 InternalFailure`` once (issue 15, part 3), which botocore
retries, multiplying the load.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.api.signed_http import AWS_JSON, call_operation, rest_call
from tests.factories.accounts import AccountCredentials, create_account
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.fixtures.live_server import LiveServer


@pytest.fixture
def other_account(committed_session_factory: sessionmaker[Session]) -> AccountCredentials:
    with committed_session_factory() as session:
        credentials = create_account(session)
        session.commit()
    return credentials


def aws_error(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    assert set(body) == {"__type", "message"}
    assert response.headers["x-amzn-errortype"] == body["__type"]
    return response.status_code, body["__type"], body["message"]


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("operation", ["ListOptimizationJobs", "ListModels"])
@pytest.mark.parametrize("value", [1e20, -1e20, "1e20", 10**30])
def test_timestamps_out_of_range_are_serialization_errors(
    live_server: LiveServer, account: AccountCredentials, operation: str, value: Any
) -> None:
    response = call_operation(live_server.url, account, operation, {"CreationTimeAfter": value})
    status, code, message = aws_error(response)
    assert (status, code) == (400, "SerializationException")
    assert message.endswith(
        "can not be converted to a Timestamp (epoch seconds or ISO-8601) at 'creationTimeAfter'"
    )


@pytest.mark.parametrize(
    "body",
    [
        nested(1000),
        b'{"NameContains": ' + nested(1000) + b"}",
        b'{"NameContains": ' + nested(100_000) + b"}",
        b'{"Tags": [{"Key": "k", "Value": ' + nested(1000) + b"}]}",
    ],
)
def test_deeply_nested_json_is_a_serialization_error(
    live_server: LiveServer, account: AccountCredentials, body: bytes
) -> None:
    status, code, message = aws_error(call_operation(live_server.url, account, "ListOptimizationJobs", body))
    assert (status, code) == (400, "SerializationException")
    assert "nested" in message


def test_an_integer_too_long_to_parse_is_a_serialization_error(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    body = b'{"MaxResults": ' + b"9" * 5000 + b"}"
    status, code, _ = aws_error(call_operation(live_server.url, account, "ListOptimizationJobs", body))
    assert (status, code) == (400, "SerializationException")


@pytest.mark.parametrize(
    ("operation", "body"),
    [
        ("ListOptimizationJobs", {"NameContains": "a\ud800"}),
        ("ListModels", {"NameContains": "a\ud800"}),
        ("DescribeOptimizationJob", {"OptimizationJobName": "a\ud800"}),
        ("CreateOptimizationJob", create_optimization_job_request(Tags=[{"Key": "k", "Value": "a\ud800"}])),
        ("CreateOptimizationJob", create_optimization_job_request(OptimizationEnvironment={"K": "\udfff"})),
    ],
)
def test_lone_surrogates_are_serialization_errors(
    live_server: LiveServer, account: AccountCredentials, operation: str, body: dict[str, Any]
) -> None:
    # json.dumps writes a lone surrogate as an escape (\ud800), which is valid JSON.
    status, code, message = aws_error(call_operation(live_server.url, account, operation, body))
    assert (status, code) == (400, "SerializationException")
    assert "lone UTF-16 surrogate" in message


def test_a_nul_in_any_string_is_a_serialization_error_and_nothing_is_stored(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    # Postgres text and JSON columns refuse \u0000: schemathesis once found a CreateModel whose
    # unknown nested member held one answered with a 500 when the request was stored.
    model = {
        "ModelName": "nul-model",
        "PrimaryContainer": {"ModelDataUrl": "s3://models/m/"},
        "Containers": [{"AdditionalModelDataSources": [{"ChannelName": "t", "S3Extra": "https://a\u0000b"}]}],
    }
    raw = json.dumps(model).encode()
    assert b"\\u0000" in raw, "precondition: the NUL travels as a JSON escape"
    for response in (
        call_operation(live_server.url, account, "CreateModel", raw),
        rest_call("POST", live_server.url, "/v1/models", account, raw=raw),
    ):
        status, code, message = aws_error(response)
        assert (status, code) == (400, "SerializationException")
        assert "NUL character" in message
    tagged = create_optimization_job_request(Tags=[{"Key": "k", "Value": "a\u0000"}])
    status, code, _ = aws_error(call_operation(live_server.url, account, "CreateOptimizationJob", tagged))
    assert (status, code) == (400, "SerializationException")
    listed = call_operation(live_server.url, account, "ListModels", {"NameContains": "nul-model"})
    assert listed.status_code == 200
    assert listed.json()["Models"] == []


def forged_token(document: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "document",
    [
        {"v": "x", "i": 1},
        {"v": "2026-01-01T00:00:00", "i": 10**30},
        {"v": "x", "i": 1, "q": "0" * 16},
        {"v": "x", "i": 1, "q": "0" * 16, "s": "0" * 64},
    ],
)
@pytest.mark.parametrize("operation", ["ListOptimizationJobs", "ListModels", "ListTags"])
def test_forged_next_tokens_are_refused(
    live_server: LiveServer, account: AccountCredentials, operation: str, document: dict[str, Any]
) -> None:
    body: dict[str, Any] = {"NextToken": forged_token(document)}
    if operation == "ListTags":
        created = call_operation(
            live_server.url,
            account,
            "CreateOptimizationJob",
            create_optimization_job_request(RoleArn=account.role_arn),
        )
        body["ResourceArn"] = created.json()["OptimizationJobArn"]
    status, code, message = aws_error(call_operation(live_server.url, account, operation, body))
    assert (status, code) == (400, "ValidationException")
    assert message.startswith("Invalid NextToken")


def test_next_tokens_do_not_cross_accounts(
    live_server: LiveServer, account: AccountCredentials, other_account: AccountCredentials
) -> None:
    for index in range(3):
        created = call_operation(
            live_server.url,
            account,
            "CreateOptimizationJob",
            create_optimization_job_request(
                OptimizationJobName=f"token-job-{index}", RoleArn=account.role_arn
            ),
        )
        assert created.status_code == 200, created.text
    first = call_operation(live_server.url, account, "ListOptimizationJobs", {"MaxResults": 1})
    token = first.json()["NextToken"]
    replayed = call_operation(
        live_server.url, other_account, "ListOptimizationJobs", {"MaxResults": 1, "NextToken": token}
    )
    status, code, message = aws_error(replayed)
    assert (status, code) == (400, "ValidationException")
    assert message.startswith("Invalid NextToken")
    second = call_operation(
        live_server.url, account, "ListOptimizationJobs", {"MaxResults": 1, "NextToken": token}
    )
    assert second.status_code == 200


@pytest.mark.parametrize("value", [2**31, 10**31, 10**401])
def test_max_runtime_beyond_aws_integer_is_a_validation_error(
    live_server: LiveServer, account: AccountCredentials, value: int
) -> None:
    body = create_optimization_job_request(StoppingCondition={"MaxRuntimeInSeconds": value})
    status, code, message = aws_error(call_operation(live_server.url, account, "CreateOptimizationJob", body))
    assert (status, code) == (400, "ValidationException")
    assert "at 'stoppingCondition.maxRuntimeInSeconds'" in message
    assert "Member must have value less than or equal to 2147483647" in message


def test_a_huge_value_is_not_echoed_once_per_violation(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    name = "x_" * 200_000  # breaks both the length and the pattern constraint
    response = call_operation(
        live_server.url, account, "DescribeOptimizationJob", {"OptimizationJobName": name}
    )
    status, code, message = aws_error(response)
    assert (status, code) == (400, "ValidationException")
    assert message.startswith("2 validation errors detected: Value 'x_x_")
    assert "(400000 characters)" in message
    assert len(response.content) < 10_000


def test_an_oversized_body_is_refused_before_authentication(live_server: LiveServer) -> None:
    limit = live_server.settings.max_request_body_bytes
    headers = {"X-Amz-Target": "SageMaker.ListModels", "Content-Type": AWS_JSON}
    declared = httpx.post(f"{live_server.url}/", content=b" " * (limit + 1), headers=headers)
    status, code, message = aws_error(declared)
    assert (status, code) == (413, "RequestEntityTooLargeException")
    assert str(limit) in message
    assert declared.headers["content-type"] == AWS_JSON

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must hold while reading
        for _ in range(limit // 65536 + 2):
            yield b" " * 65536

    streamed = httpx.post(f"{live_server.url}/v1/optimization-jobs", content=chunks())
    assert aws_error(streamed)[:2] == (413, "RequestEntityTooLargeException")
    assert streamed.headers["content-type"] == "application/json"


def test_rest_checks_the_signature_before_the_body(live_server: LiveServer) -> None:
    for path in ("/v1/optimization-jobs", "/v1/models"):
        unsigned = httpx.post(f"{live_server.url}{path}", content=b"{not json")
        assert aws_error(unsigned)[:2] == (400, "MissingAuthenticationTokenException")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "SerializationException"),
        (b"[]", "SerializationException"),
        (
            json.dumps(create_optimization_job_request(MaxInstanceCount="2")).encode(),
            "SerializationException",
        ),
        (
            json.dumps(create_optimization_job_request(OptimizationJobName="a_b")).encode(),
            "ValidationException",
        ),
    ],
)
def test_rest_and_post_slash_give_the_same_error(
    live_server: LiveServer, account: AccountCredentials, body: bytes, code: str
) -> None:
    aws = aws_error(call_operation(live_server.url, account, "CreateOptimizationJob", body))
    rest = rest_call("POST", live_server.url, "/v1/optimization-jobs", account, raw=body)
    assert aws_error(rest) == aws
    assert aws[:2] == (400, code)


@pytest.mark.parametrize(
    ("query", "body"),
    [
        ("MaxResults=lots", {"MaxResults": "lots"}),
        ("MaxResults=1.5", {"MaxResults": "1.5"}),
        ("MaxResults=1000", {"MaxResults": 1000}),
        ("CreationTimeAfter=1e20", {"CreationTimeAfter": "1e20"}),
        ("SortBy=Size", {"SortBy": "Size"}),
    ],
)
def test_rest_query_errors_are_those_of_post_slash(
    live_server: LiveServer, account: AccountCredentials, query: str, body: dict[str, Any]
) -> None:
    aws = aws_error(call_operation(live_server.url, account, "ListOptimizationJobs", body))
    rest = aws_error(rest_call("GET", live_server.url, f"/v1/optimization-jobs?{query}", account))
    assert rest == aws
    assert aws[0] == 400
