"""eaglenest's REST describe (``GET /v1/optimization-jobs/{name}``), signed like the client's own calls.

DescribeOptimizationJob carries no progress; the REST face adds Stage, ProgressPercent,
EstimatedCompletionTime, EtaSeconds, LastMessage and Events to the same body.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ClientError

from client.errors import EaglenestClientError, OptimizationJobNotFoundError

SIGNING_NAME = "sagemaker"
REQUEST_TIMEOUT_SECONDS = 30.0


def client_credentials(client: Any) -> Any:
    """The credentials the client signs with (refreshable ones are refreshed by botocore).

    botocore has no public accessor; ``_get_credentials`` is the one boto3's own CRT transfer
    support (boto3/crt.py) reads.
    """
    credentials = client._get_credentials()
    if credentials is None:
        raise EaglenestClientError("the client has no credentials to sign requests with")
    return credentials


def describe_job_progress(client: Any, name: str, *, http: httpx.Client | None = None) -> dict[str, Any]:
    """The REST description of job ``name``: the Describe body plus progress (PascalCase keys)."""
    url = f"{client.meta.endpoint_url.rstrip('/')}/v1/optimization-jobs/{quote(name, safe='')}"
    request = AWSRequest(method="GET", url=url)
    SigV4Auth(
        client_credentials(client).get_frozen_credentials(), SIGNING_NAME, client.meta.region_name
    ).add_auth(request)
    headers = dict(request.headers.items())
    response = (
        http.get(url, headers=headers)
        if http is not None
        else httpx.get(url, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS)
    )
    if response.status_code == httpx.codes.OK:
        body: dict[str, Any] = response.json()
        return body
    code, message = _error(response)
    if code == "ResourceNotFound":
        raise OptimizationJobNotFoundError(name, client.meta.endpoint_url)
    # The same exception boto3 raises, so callers handle REST and JSON-protocol errors alike.
    raise ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": response.status_code},
        },
        "DescribeOptimizationJob (GET /v1/optimization-jobs)",
    )


def _error(response: httpx.Response) -> tuple[str, str]:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP{response.status_code}", response.text[:500]
    if not isinstance(body, dict):
        return f"HTTP{response.status_code}", response.text[:500]
    code = body.get("__type") or response.headers.get("x-amzn-errortype") or f"HTTP{response.status_code}"
    return str(code).split("#")[-1].split(":")[0], str(body.get("message") or body.get("Message") or "")
