"""SigV4 on the live server: every way a signature can be wrong, and account isolation."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError
from sqlalchemy.orm import Session, sessionmaker

from db.queries.account import delete_access_key
from tests.api.signed_http import call_operation, signed_headers
from tests.factories.accounts import AccountCredentials, create_account
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.factories.sagemaker_models import create_model_request
from tests.fixtures.live_server import LiveServer, sagemaker_client

WRONG_SIGNATURE = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
    "Access Key and signing method. Consult the service documentation for details."
)


def aws_error(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    assert response.headers["x-amzn-errortype"] == body["__type"]
    assert response.headers["x-amzn-requestid"]
    return response.status_code, body["__type"], body["message"]


def test_unsigned_request_is_missing_authentication_token(live_server: LiveServer) -> None:
    response = httpx.post(
        f"{live_server.url}/", headers={"X-Amz-Target": "SageMaker.ListModels"}, content=b"{}"
    )
    assert aws_error(response) == (
        400,
        "MissingAuthenticationTokenException",
        "Request is missing Authentication Token",
    )


def test_malformed_header_is_incomplete_signature(live_server: LiveServer) -> None:
    header = "AWS4-HMAC-SHA256 Credential=AKIA/20261122/us-west-2/sagemaker/aws4_request"
    response = httpx.post(
        f"{live_server.url}/",
        headers={
            "X-Amz-Target": "SageMaker.ListModels",
            "Authorization": header,
            "X-Amz-Date": "20261122T000000Z",
        },
        content=b"{}",
    )
    status, code, message = aws_error(response)
    assert (status, code) == (400, "IncompleteSignatureException")
    assert message == (
        "Authorization header requires 'Signature' parameter. Authorization header requires 'SignedHeaders' "
        f"parameter. Authorization={header}"
    )


def test_unknown_key_is_unrecognized_client(live_server: LiveServer) -> None:
    stranger = AccountCredentials(0, "000000000000", "AKIANOTAKEY000000000", "whatever")
    client = sagemaker_client(live_server, stranger, retries={"max_attempts": 1})
    with pytest.raises(ClientError) as raised:
        client.list_optimization_jobs()
    assert raised.value.response["Error"] == {
        "Code": "UnrecognizedClientException",
        "Message": "The security token included in the request is invalid.",
    }


def test_wrong_secret_is_invalid_signature(live_server: LiveServer, account: AccountCredentials) -> None:
    wrong = AccountCredentials(
        account.account_id, account.aws_account_id, account.access_key_id, "not-the-secret"
    )
    client = sagemaker_client(live_server, wrong, retries={"max_attempts": 1})
    with pytest.raises(ClientError) as raised:
        client.list_models()
    assert raised.value.response["Error"] == {"Code": "InvalidSignatureException", "Message": WRONG_SIGNATURE}
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_body_tampered_after_signing_is_rejected(live_server: LiveServer, sagemaker: Any) -> None:
    def tamper(request: Any, **_: Any) -> None:
        request.body = request.body.replace(b'"MaxResults": 5', b'"MaxResults": 6')

    sagemaker.meta.events.register_last("before-send.sagemaker.ListOptimizationJobs", tamper)
    with pytest.raises(ClientError) as raised:
        sagemaker.list_optimization_jobs(MaxResults=5)
    assert raised.value.response["Error"]["Code"] == "InvalidSignatureException"


def test_stale_and_future_requests_are_expired(live_server: LiveServer, account: AccountCredentials) -> None:
    old = datetime.now(UTC) - timedelta(minutes=16)
    response = call_operation(live_server.url, account, "ListModels", when=old)
    status, code, message = aws_error(response)
    assert (status, code) == (400, "InvalidSignatureException")
    assert message.startswith(f"Signature expired: {old.strftime('%Y%m%dT%H%M%SZ')} is now earlier than ")
    assert message.endswith(" - 15 min.)")
    future = datetime.now(UTC) + timedelta(minutes=16)
    assert (
        "Signature not yet current"
        in aws_error(call_operation(live_server.url, account, "ListModels", when=future))[2]
    )
    fresh = call_operation(
        live_server.url, account, "ListModels", when=datetime.now(UTC) - timedelta(minutes=14)
    )
    assert fresh.status_code == 200


def test_other_service_scope_and_session_tokens_are_refused(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    response = call_operation(live_server.url, account, "ListModels", service="s3")
    assert aws_error(response)[1:] == (
        "InvalidSignatureException",
        "Credential should be scoped to correct service: 'sagemaker'.",
    )
    url = f"{live_server.url}/"
    headers = {"X-Amz-Target": "SageMaker.ListModels", "X-Amz-Security-Token": "FwoGZXIvYXdzEFAKE"}
    response = httpx.post(
        url, content=b"{}", headers=signed_headers("POST", url, b"{}", account, headers=headers)
    )
    assert aws_error(response)[1:] == (
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
    )


def test_accounts_never_see_each_other(
    live_server: LiveServer, sagemaker: Any, committed_session_factory: sessionmaker[Session]
) -> None:
    job = create_optimization_job_request()
    sagemaker.create_optimization_job(**job)
    sagemaker.create_model(**create_model_request(ModelName="private-model"))
    with committed_session_factory() as session:
        other = create_account(session)
        session.commit()
    intruder = sagemaker_client(live_server, other, retries={"max_attempts": 1})
    assert intruder.list_optimization_jobs()["OptimizationJobSummaries"] == []
    assert intruder.list_models()["Models"] == []
    for operation in ("describe_optimization_job", "stop_optimization_job", "delete_optimization_job"):
        with pytest.raises(intruder.exceptions.ResourceNotFound):
            getattr(intruder, operation)(OptimizationJobName=job["OptimizationJobName"])
    with pytest.raises(ClientError) as raised:
        intruder.describe_model(ModelName="private-model")
    assert raised.value.response["Error"]["Message"] == (
        f'Could not find model "arn:aws:sagemaker:us-west-2:{other.aws_account_id}:model/private-model".'
    )
    # The same name is free in the other account.
    intruder.create_optimization_job(
        **create_optimization_job_request(OptimizationJobName=job["OptimizationJobName"])
    )
    assert sagemaker.describe_optimization_job(OptimizationJobName=job["OptimizationJobName"])[
        "OptimizationJobStatus"
    ]


def test_region_comes_from_the_signature(live_server: LiveServer, account: AccountCredentials) -> None:
    client = sagemaker_client(live_server, account, region="eu-central-1", retries={"max_attempts": 1})
    arn = client.create_model(**create_model_request(ModelName="frankfurt"))["ModelArn"]
    assert arn == f"arn:aws:sagemaker:eu-central-1:{account.aws_account_id}:model/frankfurt"


def test_deleted_key_stops_working(
    live_server: LiveServer, committed_session_factory: sessionmaker[Session]
) -> None:
    with committed_session_factory() as session:
        doomed = create_account(session)
        session.commit()
    client = sagemaker_client(live_server, doomed, retries={"max_attempts": 1})
    client.list_models()
    with committed_session_factory() as session:
        assert delete_access_key(session, access_key_id=doomed.access_key_id)
        session.commit()
    time.sleep(live_server.settings.access_key_cache_seconds + 0.1)
    with pytest.raises(ClientError) as raised:
        client.list_models()
    assert raised.value.response["Error"]["Code"] == "UnrecognizedClientException"
