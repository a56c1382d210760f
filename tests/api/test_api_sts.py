"""STS GetCallerIdentity on the query protocol, through boto3 and the real AWS CLI."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.factories.accounts import AccountCredentials
from tests.fixtures.live_server import AWS_CLI, TEST_REGION, LiveServer


def sts_client(server: LiveServer, access_key_id: str, secret: str) -> Any:
    return boto3.client(
        "sts",
        endpoint_url=server.url,
        region_name=TEST_REGION,
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret,
        config=Config(retries={"max_attempts": 1, "mode": "legacy"}),
    )


def signed_form_post(server: LiveServer, account: AccountCredentials, body: str, service: str) -> Any:
    request = AWSRequest(
        method="POST",
        url=server.url + "/",
        data=body.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    credentials = Credentials(account.access_key_id, account.secret_access_key)
    SigV4Auth(credentials, service, TEST_REGION).add_auth(request)
    return request


def test_get_caller_identity_names_the_keys_account(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    identity = sts_client(live_server, account.access_key_id, account.secret_access_key).get_caller_identity()
    assert identity["Account"] == account.aws_account_id
    assert identity["Arn"] == f"arn:aws:iam::{account.aws_account_id}:root"
    assert identity["UserId"] == account.aws_account_id
    assert identity["ResponseMetadata"]["RequestId"]


def test_other_sts_actions_are_refused_in_the_query_error_shape(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    client = sts_client(live_server, account.access_key_id, account.secret_access_key)
    with pytest.raises(ClientError) as refused:
        client.assume_role(RoleArn=account.role_arn, RoleSessionName="session")
    assert refused.value.response["Error"]["Code"] == "InvalidAction"
    assert refused.value.response["Error"]["Type"] == "Sender"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert refused.value.response["Error"]["Message"].startswith(
        "Could not find operation AssumeRole for version 2011-06-15."
    )


def test_unknown_keys_and_foreign_scopes_get_sts_auth_codes(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    with pytest.raises(ClientError) as unknown:
        sts_client(live_server, "AKIANOTAKEY", "secret").get_caller_identity()
    assert unknown.value.response["Error"]["Code"] == "InvalidClientTokenId"
    assert unknown.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403

    body = "Action=GetCallerIdentity&Version=2011-06-15"
    request = signed_form_post(live_server, account, body, "sagemaker")
    answer = requests.post(request.url, data=request.body, headers=dict(request.headers), timeout=10)
    assert answer.status_code == 403
    assert answer.headers["content-type"].startswith("text/xml")
    assert "<Code>SignatureDoesNotMatch</Code>" in answer.text
    assert "<Message>Credential should be scoped to correct service: 'sts'.</Message>" in answer.text


def test_the_cli_prints_the_callers_identity(
    live_server: LiveServer, account: AccountCredentials, tmp_path: Path
) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "AWS_ACCESS_KEY_ID": account.access_key_id,
        "AWS_SECRET_ACCESS_KEY": account.secret_access_key,
        "AWS_DEFAULT_REGION": TEST_REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }
    completed = subprocess.run(
        [str(AWS_CLI), "sts", "get-caller-identity", "--endpoint-url", live_server.url, "--output", "text"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == [
        account.aws_account_id,
        f"arn:aws:iam::{account.aws_account_id}:root",
        account.aws_account_id,
    ]
