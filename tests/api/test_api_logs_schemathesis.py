"""Property-based tests of the CloudWatch Logs operations (schemathesis), one schema per operation.

openapi.yaml documents ``POST /`` once, for every service behind it, with an untyped body;
here each Logs operation gets an OpenAPI document of its own, cut from botocore's logs
model (members, lengths, ranges, enums), so generated requests, valid and not, reach the
handlers. The answer must never be a server error, and must be 200 or an AWS error body.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests
import schemathesis
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy.orm import Session, sessionmaker

from api.operations.logs import LOGS_OPERATIONS
from core.logs.service_model import LOGS_TARGET_PREFIX, logs_service_model
from core.sagemaker.service_model import ServiceModel
from core.services.log_writer import now_ms, write_log_events
from db.queries.log_event import NewLogEvent
from tests.api.signed_http import AWS_JSON
from tests.factories.accounts import AccountCredentials, create_account
from tests.fixtures.live_server import TEST_REGION, LiveServer

schemathesis.serializer.alias(AWS_JSON, "application/json")
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
ERROR_BODY = {
    "type": "object",
    "required": ["__type", "message"],
    "properties": {"__type": {"type": "string"}, "message": {"type": "string"}},
}

pytestmark = pytest.mark.e2e
FUZZ_GROUP = "/aws/sagemaker/OptimizationJobs"
FUZZ_STREAM = "job1"


def shape_schema(model: ServiceModel, name: str, depth: int = 0) -> dict[str, Any]:
    """JSON Schema of a botocore shape: what a client may send (unanchored patterns anchored)."""
    shape = model.shape(name)
    kind = shape["type"]
    if kind == "structure":
        members = model.members(name)
        return {
            "type": "object",
            "properties": {
                member: shape_schema(model, target, depth + 1) for member, target in members.items()
            },
        }
    if kind == "list":
        schema: dict[str, Any] = {
            "type": "array",
            "items": shape_schema(model, shape["member"]["shape"], depth + 1),
        }
        schema.update(
            {key: shape[bound] for bound, key in (("min", "minItems"), ("max", "maxItems")) if bound in shape}
        )
        return schema
    if kind == "string":
        schema = {"type": "string"}
        if "enum" in shape:
            schema["enum"] = list(shape["enum"])
        schema.update(
            {
                key: shape[bound]
                for bound, key in (("min", "minLength"), ("max", "maxLength"))
                if bound in shape
            }
        )
        if "pattern" in shape:
            schema["pattern"] = f"^{shape['pattern']}$"
        return schema
    if kind in ("integer", "long"):
        schema = {"type": "integer"}
        schema.update(
            {key: shape[bound] for bound, key in (("min", "minimum"), ("max", "maximum")) if bound in shape}
        )
        return schema
    if kind == "boolean":
        return {"type": "boolean"}
    return {}


def operation_document(operation: str) -> dict[str, Any]:
    model = logs_service_model()
    input_shape = model.input_shape_name(operation)
    assert input_shape is not None
    body = shape_schema(model, input_shape)
    # Random names would only ever find nothing: name the seeded group and stream instead, so
    # generated requests get past the look-up and into paging and filtering.
    known = {
        "logGroupName": {"type": "string", "enum": [FUZZ_GROUP]},
        "logGroupNamePrefix": {"type": "string", "enum": ["/aws/", FUZZ_GROUP]},
        "logStreamName": {"type": "string", "enum": [FUZZ_STREAM]},
        "logStreamNames": {"type": "array", "items": {"type": "string", "enum": [FUZZ_STREAM]}},
    }
    body["properties"].update({name: known[name] for name in body["properties"] if name in known})
    body["properties"].pop("logGroupIdentifier", None)
    error = {"description": "An AWS error", "content": {AWS_JSON: {"schema": ERROR_BODY}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": f"Logs {operation}", "version": "2014-03-28"},
        "paths": {
            "/": {
                "post": {
                    "operationId": operation,
                    "parameters": [
                        {
                            "name": "X-Amz-Target",
                            "in": "header",
                            "required": True,
                            "schema": {"type": "string", "enum": [f"{LOGS_TARGET_PREFIX}.{operation}"]},
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {AWS_JSON: {"schema": body}},
                    },
                    "responses": {
                        "200": {
                            "description": "The output",
                            "content": {AWS_JSON: {"schema": {"type": "object"}}},
                        },
                        "400": error,
                        "413": error,
                    },
                }
            }
        },
    }


class LogsSigV4(requests.auth.AuthBase):
    """Sign as botocore's logs client does: service ``logs``, the body and every X-Amz-* header."""

    def __init__(self, credentials: AccountCredentials) -> None:
        self._credentials = Credentials(credentials.access_key_id, credentials.secret_access_key)

    def __call__(self, prepared: requests.PreparedRequest) -> requests.PreparedRequest:
        body = prepared.body or b""
        headers = {
            name: value
            for name, value in prepared.headers.items()
            if name.lower() == "content-type" or name.lower().startswith("x-amz-")
        }
        request = AWSRequest(
            method=prepared.method,
            url=prepared.url,
            data=body.encode() if isinstance(body, str) else body,
            headers=headers,
        )
        SigV4Auth(self._credentials, "logs", TEST_REGION).add_auth(request)
        prepared.headers.update(dict(request.headers.items()))
        return prepared


@pytest.fixture(scope="module")
def logs_fuzz_account(committed_session_factory: sessionmaker[Session]) -> AccountCredentials:
    with committed_session_factory() as session:
        credentials = create_account(session)
        write_log_events(
            session,
            account_id=credentials.account_id,
            region=TEST_REGION,
            group_name=FUZZ_GROUP,
            stream_name=FUZZ_STREAM,
            events=[NewLogEvent(now_ms() - 1000 * index, f"line {index} ERROR") for index in range(30)],
            retention_in_days=30,
        )
        session.commit()
    return credentials


def _fuzz(operation: str) -> Any:
    """A test of its own per operation: schemathesis parametrizes one schema per test function."""
    schema = schemathesis.openapi.from_dict(operation_document(operation))

    @schema.parametrize()
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    def fuzz(
        case: schemathesis.Case[Any], live_server: LiveServer, logs_fuzz_account: AccountCredentials
    ) -> None:
        case.call_and_validate(base_url=live_server.url, auth=LogsSigV4(logs_fuzz_account), checks=CHECKS)

    return fuzz


assert sorted(LOGS_OPERATIONS) == [
    "DescribeLogGroups",
    "DescribeLogStreams",
    "FilterLogEvents",
    "GetLogEvents",
]
test_describe_log_groups = _fuzz("DescribeLogGroups")
test_describe_log_streams = _fuzz("DescribeLogStreams")
test_get_log_events = _fuzz("GetLogEvents")
test_filter_log_events = _fuzz("FilterLogEvents")
