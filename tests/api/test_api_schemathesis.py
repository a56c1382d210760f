"""Property-based tests of the whole api against the committed openapi.yaml (schemathesis).

Every documented operation gets generated requests, valid and not, signed with SigV4 as a
real client signs them; the answer must never be a server error, and its status code,
content type and body must be ones openapi.yaml documents for that operation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy.orm import Session, sessionmaker

from tests.api.signed_http import AWS_JSON
from tests.factories.accounts import AccountCredentials, create_account
from tests.fixtures.live_server import TEST_REGION, LiveServer

# POST / takes AWS JSON 1.1: JSON in a content type of its own.
schemathesis.serializer.alias(AWS_JSON, "application/json")

OPENAPI_FILE = Path(__file__).resolve().parents[2] / "openapi.yaml"
SCHEMA = schemathesis.openapi.from_path(OPENAPI_FILE)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

pytestmark = pytest.mark.e2e


class SigV4(requests.auth.AuthBase):
    """Sign a prepared request as botocore does: Host, X-Amz-Date, every X-Amz-* header, the body."""

    def __init__(self, credentials: AccountCredentials) -> None:
        self._credentials = Credentials(credentials.access_key_id, credentials.secret_access_key)

    def __call__(self, prepared: requests.PreparedRequest) -> requests.PreparedRequest:
        body = prepared.body or b""
        signed = {
            name: value
            for name, value in prepared.headers.items()
            if name.lower() == "content-type" or name.lower().startswith("x-amz-")
        }
        request = AWSRequest(
            method=prepared.method,
            url=prepared.url,
            data=body.encode() if isinstance(body, str) else body,
            headers=signed,
        )
        SigV4Auth(self._credentials, "sagemaker", TEST_REGION).add_auth(request)
        prepared.headers.update(dict(request.headers.items()))
        return prepared


@pytest.fixture(scope="module")
def fuzz_account(committed_session_factory: sessionmaker[Session]) -> AccountCredentials:
    with committed_session_factory() as session:
        credentials = create_account(session)
        session.commit()
    return credentials


# One pytest item per operation, each with its own node id (schemathesis' own parametrize gives
# all of them one id, and pytest-xdist, which schedules by id, then ran only one of them).
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.mark.parametrize("operation", OPERATIONS, ids=[operation.label for operation in OPERATIONS])
def test_the_api_behaves_as_documented(
    operation: Any, live_server: LiveServer, fuzz_account: AccountCredentials
) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def behaves_as_documented(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(base_url=live_server.url, auth=SigV4(fuzz_account), checks=CHECKS)

    behaves_as_documented()


def test_every_documented_operation_is_tested() -> None:
    labels = {operation.label for operation in OPERATIONS}
    assert len(labels) == len(OPERATIONS) >= 19
    assert {"POST /", "GET /v1/optimization-jobs", "POST /v1/optimization-jobs"} <= labels
