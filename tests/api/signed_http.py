"""Raw HTTP requests signed by botocore's SigV4 signer, for tests that need control over every header."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.factories.accounts import AccountCredentials

AWS_JSON = "application/x-amz-json-1.1"


def signed_headers(
    method: str,
    url: str,
    body: bytes,
    credentials: AccountCredentials,
    *,
    headers: dict[str, str] | None = None,
    region: str = "us-west-2",
    service: str = "sagemaker",
    when: datetime | None = None,
) -> dict[str, str]:
    """Headers (with Authorization and X-Amz-Date) botocore computes for this request at ``when``."""
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    stamp = (when or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    request.headers["X-Amz-Date"] = stamp
    request.context["timestamp"] = stamp  # add_auth() would re-stamp with the current time
    signer = SigV4Auth(Credentials(credentials.access_key_id, credentials.secret_access_key), service, region)
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    signed = signer.signed_headers(signer.headers_to_sign(request))
    scope = f"{credentials.access_key_id}/{stamp[:8]}/{region}/{service}/aws4_request"
    result = dict(request.headers.items())
    result["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders={signed}, Signature={signature}"
    )
    return result


def call_operation(
    base_url: str,
    credentials: AccountCredentials,
    operation: str | None,
    body: bytes | dict[str, Any] = b"{}",
    **kwargs: Any,
) -> httpx.Response:
    """POST / with ``X-Amz-Target: SageMaker.<operation>`` (or none), signed."""
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    headers = {"Content-Type": AWS_JSON}
    if operation is not None:
        headers["X-Amz-Target"] = operation if "." in operation else f"SageMaker.{operation}"
    url = f"{base_url}/"
    return httpx.post(
        url, content=raw, headers=signed_headers("POST", url, raw, credentials, headers=headers, **kwargs)
    )


def rest_call(
    method: str,
    base_url: str,
    path: str,
    credentials: AccountCredentials,
    body: dict[str, Any] | None = None,
    *,
    raw: bytes | None = None,
    region: str = "us-west-2",
) -> httpx.Response:
    """A signed /v1 request, the way the dashboard sends them (``raw``: these exact body bytes),
    for the resources of ``region`` (the region it is signed for)."""
    if raw is None:
        raw = b"" if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if raw else {}
    url = f"{base_url}{path}"
    return httpx.request(
        method,
        url,
        content=raw,
        headers=signed_headers(method, url, raw, credentials, headers=headers, region=region),
    )
