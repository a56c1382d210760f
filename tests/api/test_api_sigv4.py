"""SigV4 verification against AWS's own worked example and against botocore's signer."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from api.auth.sigv4 import (
    SignedRequest,
    canonical_request,
    check_request_time,
    check_scope,
    expected_signature,
    parse_authorization,
    payload_hash,
    signature_matches,
)
from core.sagemaker.errors import IncompleteSignatureException, InvalidSignatureException

# The boto3 CreateOptimizationJob request captured in shared/reference/aws-api.md §6.
EXAMPLE_AUTHORIZATION = (
    "AWS4-HMAC-SHA256 Credential=test/20261122/us-west-2/sagemaker/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
    "Signature=f366aa66a7b11a089004ae308494504475f548d3d62bd2ba8e25cc9091062c93"
)
EXAMPLE_CANONICAL_REQUEST = """POST
/

content-type:application/x-amz-json-1.1
host:127.0.0.1:53191
x-amz-date:20261122T025100Z
x-amz-target:SageMaker.CreateOptimizationJob

content-type;host;x-amz-date;x-amz-target
1d87c5d35e4dabed6ce0446cd20a0bc325c889780c8e843982f1cd0967c8f570"""


class _FixedBodyRequest(SignedRequest):
    """The reference gives the body's hash, not its bytes: substitute the hash."""

    def __init__(self) -> None:
        super().__init__(
            method="POST",
            raw_path="/",
            raw_query="",
            headers=[
                ("content-type", "application/x-amz-json-1.1"),
                ("host", "127.0.0.1:53191"),
                ("x-amz-date", "20261122T025100Z"),
                ("x-amz-target", "SageMaker.CreateOptimizationJob"),
                ("x-amz-content-sha256", "1d87c5d35e4dabed6ce0446cd20a0bc325c889780c8e843982f1cd0967c8f570"),
            ],
            body=b"",
        )


def test_worked_example_from_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    request = _FixedBodyRequest()
    authorization = parse_authorization(EXAMPLE_AUTHORIZATION)
    # The declared hash is not the empty body's, so let payload_hash return it unchecked here.
    monkeypatch.setattr(
        "api.auth.sigv4.payload_hash",
        lambda req: "1d87c5d35e4dabed6ce0446cd20a0bc325c889780c8e843982f1cd0967c8f570",
    )
    assert canonical_request(request, authorization) == EXAMPLE_CANONICAL_REQUEST
    assert expected_signature(request, authorization, "test", "20261122T025100Z") == authorization.signature
    assert signature_matches(request, authorization, "test", "20261122T025100Z")
    assert not signature_matches(request, authorization, "wrong", "20261122T025100Z")


def _botocore_signed(url: str, body: bytes, headers: dict[str, str], secret: str = "s3cret") -> SignedRequest:
    request = AWSRequest(method="POST", url=url, data=body, headers=headers)
    SigV4Auth(Credentials("AKIDEXAMPLE", secret), "sagemaker", "eu-central-1").add_auth(request)
    parts = urlsplit(url)
    received = [(name.lower(), value) for name, value in request.headers.items()] + [("host", parts.netloc)]
    return SignedRequest("POST", parts.path, parts.query, received, body)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8600/",
        "http://127.0.0.1:8600/prefix/v1/optimization-jobs/a%20b/../c",
        "http://api.example:8080/v1/models?SortOrder=Descending&MaxResults=5&NameContains=a%2Fb",
        "http://h/v1//double//slashes/./x/",
    ],
)
def test_matches_botocore_for_paths_queries_and_headers(url: str) -> None:
    body = b'{"OptimizationJobName": "j\xc3\xa9b"}'
    signed = _botocore_signed(url, body, {"Content-Type": "application/json", "X-Custom": "  a   b  "})
    authorization = parse_authorization(signed.header("authorization") or "")
    amz_date = signed.header("x-amz-date") or ""
    assert signature_matches(signed, authorization, "s3cret", amz_date)
    tampered = SignedRequest(signed.method, signed.raw_path, signed.raw_query, signed.headers, body + b" ")
    assert not signature_matches(tampered, authorization, "s3cret", amz_date)


def test_declared_payload_hash_must_match_the_body() -> None:
    body = b"{}"
    good = SignedRequest("POST", "/", "", [("x-amz-content-sha256", hashlib.sha256(body).hexdigest())], body)
    assert payload_hash(good) == hashlib.sha256(body).hexdigest()
    lying = SignedRequest("POST", "/", "", [("x-amz-content-sha256", "0" * 64)], body)
    with pytest.raises(InvalidSignatureException, match="does not match what was computed"):
        payload_hash(lying)
    unsigned = SignedRequest("POST", "/", "", [("x-amz-content-sha256", "UNSIGNED-PAYLOAD")], body)
    with pytest.raises(InvalidSignatureException, match="UNSIGNED-PAYLOAD"):
        payload_hash(unsigned)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("AWS AKID:signature", "Unsupported AWS 'algorithm': 'AWS'"),
        (
            "AWS4-HMAC-SHA256 Credential=AKID/20261122/us-west-2/sagemaker/aws4_request",
            "Authorization header requires 'Signature' parameter. Authorization header requires "
            "'SignedHeaders' parameter. Authorization=AWS4-HMAC-SHA256 Credential=AKID/20261122",
        ),
        (
            "AWS4-HMAC-SHA256 Credential=AKID /20261122/us-west-2/sagemaker/aws4_request, "
            "SignedHeaders=host, Signature=abc",
            "'/20261122/us-west-2/sagemaker/aws4_request' not a valid key=value pair (missing equal-sign)",
        ),
        (
            "AWS4-HMAC-SHA256 Credential=AKID/20261122/us-west-2, SignedHeaders=host, Signature=abc",
            "Credential must have the form",
        ),
    ],
)
def test_malformed_authorization_headers(header: str, message: str) -> None:
    with pytest.raises(IncompleteSignatureException) as raised:
        parse_authorization(header)
    assert message in raised.value.message


@pytest.mark.parametrize(
    ("credential", "signed_headers", "error", "message"),
    [
        (
            "AKID/20261122/us-west-2/s3/aws4_request",
            "host",
            InvalidSignatureException,
            "correct service: 'sagemaker'",
        ),
        ("AKID/20261122/us-west-2/sagemaker/aws5", "host", InvalidSignatureException, "valid terminator"),
        ("AKID/20261122/US_WEST/sagemaker/aws4_request", "host", InvalidSignatureException, "valid region"),
    ],
)
def test_scope_checks(credential: str, signed_headers: str, error: type[Exception], message: str) -> None:
    authorization = parse_authorization(
        f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders={signed_headers}, Signature=00"
    )
    with pytest.raises(error, match=message.replace("(", r"\(").replace("'", "'")):
        check_scope(authorization)


def test_clock_skew_and_scope_date() -> None:
    now = datetime(2026, 11, 22, 3, 10, 55, tzinfo=UTC)
    skew = timedelta(minutes=15)
    authorization = parse_authorization(
        "AWS4-HMAC-SHA256 Credential=AKID/20261122/us-west-2/sagemaker/aws4_request, "
        "SignedHeaders=host, Signature=00"
    )
    check_request_time(now - timedelta(minutes=14), authorization, now=now, max_skew=skew)
    with pytest.raises(InvalidSignatureException) as expired:
        check_request_time(
            datetime(2026, 11, 22, 2, 50, 55, tzinfo=UTC), authorization, now=now, max_skew=skew
        )
    assert expired.value.message == (
        "Signature expired: 20261122T025055Z is now earlier than 20261122T025555Z "
        "(20261122T031055Z - 15 min.)"
    )
    with pytest.raises(InvalidSignatureException, match="Signature not yet current: 20261122T033055Z"):
        check_request_time(now + timedelta(minutes=20), authorization, now=now, max_skew=skew)
    with pytest.raises(InvalidSignatureException, match="'20261122' != '20261121'"):
        check_request_time(
            datetime(2026, 11, 21, 23, 59, tzinfo=UTC), authorization, now=now, max_skew=timedelta(days=1)
        )
