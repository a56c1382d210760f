"""eaglenest_client: where its settings come from, and that it is a real boto3 client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.client import BaseClient
from botocore.credentials import Credentials

from client import EndpointNotConfiguredError, eaglenest_client, resolve_client_settings
from tests.factories.accounts import AccountCredentials
from tests.fixtures.live_server import LiveServer


def write_stack_file(state_dir: Path, **overrides: Any) -> Path:
    state_dir.mkdir(parents=True, exist_ok=True)
    info = {
        "api_url": "http://127.0.0.1:8600",
        "s3_endpoint_url": "http://127.0.0.1:8601",
        "region": "eu-west-1",
        "aws_access_key_id": "stack-key",
        "aws_secret_access_key": "stack-secret",
        "state_dir": str(state_dir),
        "database_url": "sqlite:///x",
        "pid": 1,
        "logs": {},
    } | overrides
    (state_dir / "stack.json").write_text(json.dumps(info))
    return state_dir


def test_stack_file_supplies_everything_when_nothing_else_does(tmp_path: Path) -> None:
    state = write_stack_file(tmp_path / "state")
    settings = resolve_client_settings(environ={"EAGLENEST_STATE_DIR": str(state)})
    assert settings.endpoint_url == "http://127.0.0.1:8600"
    assert settings.s3_endpoint_url == "http://127.0.0.1:8601"
    assert settings.region == "eu-west-1"
    assert settings.credentials is not None
    assert (settings.credentials.access_key, settings.credentials.secret_key) == ("stack-key", "stack-secret")
    assert settings.stack_file == state / "stack.json"


def test_environment_beats_the_stack_file_and_arguments_beat_both(tmp_path: Path) -> None:
    state = write_stack_file(tmp_path / "state")
    environ = {
        "EAGLENEST_STATE_DIR": str(state),
        "EAGLENEST_ENDPOINT_URL": "http://env-api:1",
        "EAGLENEST_S3_ENDPOINT_URL": "http://env-s3:2",
        "AWS_DEFAULT_REGION": "ap-south-1",
        "AWS_ACCESS_KEY_ID": "env-key",
        "AWS_SECRET_ACCESS_KEY": "env-secret",
        "AWS_SESSION_TOKEN": "env-token",
    }
    from_env = resolve_client_settings(environ=environ)
    assert (from_env.endpoint_url, from_env.s3_endpoint_url, from_env.region) == (
        "http://env-api:1",
        "http://env-s3:2",
        "ap-south-1",
    )
    assert from_env.credentials is not None
    assert from_env.credentials.token == "env-token"
    assert from_env.stack_file is None  # nothing was missing, so stack.json was not used

    from_args = resolve_client_settings(
        endpoint_url="http://arg-api:3",
        region="sa-east-1",
        credentials=("arg-key", "arg-secret"),
        s3_endpoint_url="http://arg-s3:4",
        environ=environ,
    )
    assert (from_args.endpoint_url, from_args.s3_endpoint_url, from_args.region) == (
        "http://arg-api:3",
        "http://arg-s3:4",
        "sa-east-1",
    )
    assert from_args.credentials is not None
    assert from_args.credentials.access_key == "arg-key"


def test_aws_profile_is_left_to_boto3_instead_of_the_stack_key(tmp_path: Path) -> None:
    state = write_stack_file(tmp_path / "state")
    settings = resolve_client_settings(environ={"EAGLENEST_STATE_DIR": str(state), "AWS_PROFILE": "work"})
    assert settings.credentials is None
    assert settings.profile == "work"


def test_no_endpoint_anywhere_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        EndpointNotConfiguredError, match=r"pass endpoint_url=.*EAGLENEST_ENDPOINT_URL.*stack"
    ):
        resolve_client_settings(environ={"EAGLENEST_STATE_DIR": str(tmp_path / "empty")})


def test_a_broken_stack_file_is_named(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "stack.json").write_text('{"api_url": 1}')
    with pytest.raises(EndpointNotConfiguredError, match=r"stack\.json is not a valid stack file"):
        resolve_client_settings(environ={"EAGLENEST_STATE_DIR": str(state)})


def test_bad_credentials_argument_says_what_is_accepted() -> None:
    with pytest.raises(TypeError, match=r"credentials must be botocore Credentials or a tuple"):
        resolve_client_settings(endpoint_url="http://x", credentials=("only-key",), environ={})


def test_client_is_a_real_boto3_sagemaker_client_with_every_waiter(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    client = eaglenest_client(
        live_server.url, "us-west-2", Credentials(account.access_key_id, account.secret_access_key)
    )
    assert isinstance(client, BaseClient)
    assert client.meta.service_model.service_name == "sagemaker"
    assert client.list_optimization_jobs()["OptimizationJobSummaries"] == []
    assert "optimization_job_completed_or_stopped" in client.waiter_names
    assert "endpoint_in_service" in client.waiter_names  # the shipped waiters are all still there
    assert len(client.waiter_names) == 14
    with pytest.raises(client.exceptions.ResourceNotFound):
        client.describe_optimization_job(OptimizationJobName="absent")
