"""A signature must cover what selects the operation (X-Amz-Target), and name a Host we serve.

Before issue 15 a request signed without ``x-amz-target`` could be re-sent within its 15
minutes as any other operation; these tests replay one the way an eavesdropper would.
"""

from __future__ import annotations

import boto3
import httpx
import pytest
from botocore.config import Config

from api.auth.signed_headers import HostPolicy, check_signed_headers, hostname
from api.auth.sigv4 import SignedRequest, parse_authorization
from core.sagemaker.errors import IncompleteSignatureException, InvalidSignatureException
from tests.api.signed_http import AWS_JSON, signed_headers
from tests.factories.accounts import AccountCredentials
from tests.fixtures.live_server import LiveServer


def aws_error(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    assert response.headers["x-amzn-errortype"] == body["__type"]
    return response.status_code, body["__type"], body["message"]


def test_a_describe_signature_cannot_be_replayed_as_delete(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    url = f"{live_server.url}/"
    body = b'{"OptimizationJobName": "victim"}'
    # Signed with only Content-Type, Host and X-Amz-Date; the target travels unsigned.
    headers = signed_headers("POST", url, body, account, headers={"Content-Type": AWS_JSON})
    for operation in ("DescribeOptimizationJob", "DeleteOptimizationJob", "StopOptimizationJob"):
        response = httpx.post(
            url, content=body, headers={**headers, "X-Amz-Target": f"SageMaker.{operation}"}
        )
        assert aws_error(response) == (
            400,
            "IncompleteSignatureException",
            "Every 'X-Amz-*' header of the request must be a 'SignedHeader' in the AWS Authorization; "
            "not signed: x-amz-target.",
        )


def test_x_amz_date_must_be_signed(live_server: LiveServer, account: AccountCredentials) -> None:
    url = f"{live_server.url}/"
    headers = signed_headers("POST", url, b"{}", account, headers={"X-Amz-Target": "SageMaker.ListModels"})
    authorization = headers["Authorization"].replace("host;x-amz-date;x-amz-target", "host;x-amz-target")
    response = httpx.post(url, content=b"{}", headers={**headers, "Authorization": authorization})
    assert aws_error(response)[1:] == (
        "IncompleteSignatureException",
        "'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization.",
    )


def test_a_host_the_server_does_not_serve_is_refused(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    # Correctly signed, but for another endpoint's name.
    url = "http://sagemaker.us-west-2.amazonaws.com/"
    headers = signed_headers("POST", url, b"{}", account, headers={"X-Amz-Target": "SageMaker.ListModels"})
    headers["Host"] = "sagemaker.us-west-2.amazonaws.com"
    response = httpx.post(f"{live_server.url}/", content=b"{}", headers=headers)
    status, code, message = aws_error(response)
    assert (status, code) == (400, "InvalidSignatureException")
    assert message.startswith(
        "The signed Host 'sagemaker.us-west-2.amazonaws.com' is not a name this endpoint serves"
    )


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_botocore_signs_what_is_required_for_every_served_name(
    live_server: LiveServer, account: AccountCredentials, host: str
) -> None:
    port = live_server.url.rsplit(":", 1)[1]
    client = boto3.client(
        "sagemaker",
        endpoint_url=f"http://{host}:{port}",
        region_name="us-west-2",
        aws_access_key_id=account.access_key_id,
        aws_secret_access_key=account.secret_access_key,
        config=Config(retries={"max_attempts": 1, "mode": "legacy"}),
    )
    assert client.list_models()["Models"] == []


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("Example.COM:8600", "example.com"),
        ("example.com", "example.com"),
        ("[::1]:8600", "::1"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("127.0.0.1:1", "127.0.0.1"),
    ],
)
def test_hostname_drops_the_port(host: str, name: str) -> None:
    assert hostname(host) == name


def _request(host: str) -> SignedRequest:
    return SignedRequest(method="GET", raw_path="/", raw_query="", headers=[("host", host)], body=b"")


def test_host_policy() -> None:
    policy = HostPolicy(["localhost", " API.example.com "])
    policy.check(_request("api.example.com:443"))
    policy.check(_request("LOCALHOST:8600"))
    with pytest.raises(InvalidSignatureException):
        policy.check(_request("evil.example.com"))
    with pytest.raises(InvalidSignatureException):
        HostPolicy([]).check(_request("localhost"))
    HostPolicy(["*"]).check(_request("anything.at.all"))


@pytest.mark.parametrize(
    ("signed", "headers", "message"),
    [
        ("x-amz-date", [], "'Host' or ':authority' must be a 'SignedHeader'"),
        ("host", [], "'X-Amz-Date' must be a 'SignedHeader'"),
        ("host;x-amz-date", [("x-amz-target", "SageMaker.ListModels")], "not signed: x-amz-target."),
        (
            "host;x-amz-date",
            [("x-amz-content-sha256", "00"), ("x-amz-meta-a", "b"), ("x-amz-meta-a", "c")],
            "not signed: x-amz-content-sha256, x-amz-meta-a.",
        ),
    ],
)
def test_required_signed_headers(signed: str, headers: list[tuple[str, str]], message: str) -> None:
    authorization = parse_authorization(
        f"AWS4-HMAC-SHA256 Credential=AKID/20261122/us-west-2/sagemaker/aws4_request, "
        f"SignedHeaders={signed}, Signature=00"
    )
    request = SignedRequest(
        method="POST",
        raw_path="/",
        raw_query="",
        headers=[("host", "localhost"), ("x-amz-date", "20261122T000000Z"), *headers],
        body=b"",
    )
    with pytest.raises(IncompleteSignatureException) as raised:
        check_signed_headers(request, authorization)
    assert message in raised.value.message


def test_headers_outside_x_amz_may_stay_unsigned() -> None:
    authorization = parse_authorization(
        "AWS4-HMAC-SHA256 Credential=AKID/20261122/us-west-2/sagemaker/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=00"
    )
    headers = [("host", "h"), ("x-amz-date", "d"), ("user-agent", "u"), ("x-amzn-trace-id", "t")]
    check_signed_headers(SignedRequest("POST", "/", "", headers, b""), authorization)
