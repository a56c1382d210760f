"""Endpoints end to end: boto3 (sagemaker and sagemaker-runtime) and the AWS CLI → api process →
Redis → `eaglenest worker --endpoints` → serving processes of the tiny target and head.

One endpoint worker serves the module; each test deploys its own endpoint and deletes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError, WaiterError
from sqlalchemy.orm import Session, sessionmaker

from db.settings import Settings
from stack.processes import ManagedProcess
from tests.api.signed_http import rest_call
from tests.factories.accounts import AccountCredentials
from tests.fixtures.worker import launch_endpoint_worker, module_worker
from tests.worker.endpoint_clients import (
    WORKER_REGION,
    deploy,
    instance_pid,
    instances,
    invoke_json,
    kill,
    runtime_client,
    wait_for,
    wait_in_service,
)
from tests.worker.tiny_inputs import upload_directory

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
AWS_CLI = Path(sys.executable).with_name("aws")


@pytest.fixture(scope="module")
def endpoint_worker(
    worker_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    with module_worker(
        worker_settings, tmp_path_factory, "endpoints", launch=launch_endpoint_worker
    ) as process:
        yield process


@pytest.fixture
def uploaded(
    s3_client: Any, s3_bucket: str, tiny_smollm2_target_dir: Path, tiny_head_dir: Path
) -> tuple[str, str]:
    return (
        upload_directory(s3_client, tiny_smollm2_target_dir, s3_bucket, "models/tiny"),
        upload_directory(s3_client, tiny_head_dir, s3_bucket, "heads/tiny"),
    )


def _error(raised: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    return raised.value.response["Error"]["Code"], raised.value.response["Error"]["Message"]


def test_deploy_invoke_balance_restart_delete(  # noqa: PLR0917 - fixtures
    endpoint_worker: ManagedProcess,
    worker_sagemaker: Any,
    worker_api_url: str,
    worker_account: AccountCredentials,
    worker_session_factory: sessionmaker[Session],
    uploaded: tuple[str, str],
) -> None:
    model_uri, head_uri = uploaded
    name, _ = deploy(worker_sagemaker, model_uri=model_uri, head_uri=head_uri, instances=2)
    assert worker_sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"] == "Creating"
    described = wait_in_service(worker_sagemaker, name)
    variant = described["ProductionVariants"][0]
    assert (variant["CurrentInstanceCount"], variant["DesiredInstanceCount"]) == (2, 2), described
    runtime = runtime_client(worker_api_url, worker_account)

    answer = invoke_json(
        runtime, name, {"inputs": "Tell me about rivers.", "parameters": {"max_new_tokens": 8}}
    )
    assert isinstance(answer, list), answer
    assert isinstance(answer[0]["generated_text"], str), answer
    chat = invoke_json(
        runtime, name, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "temperature": 0}
    )
    assert chat["object"] == "chat.completion"
    assert chat["usage"]["completion_tokens"] >= 1
    completion = invoke_json(runtime, name, {"prompt": "Once upon", "max_tokens": 5})
    assert completion["object"] == "text_completion"

    # Requests are spread over both instances (each one's own /metrics counts what it served).
    rows = instances(worker_session_factory, worker_account, name)
    for _ in range(4):
        invoke_json(runtime, name, {"inputs": "Count to three.", "parameters": {"max_new_tokens": 4}})
    served = [_requests_served(row.url) for row in rows if row.url]
    assert len(served) == 2, served
    assert all(count >= 2 for count in served), served

    _check_metrics_and_dashboard(worker_api_url, worker_account, name, described["EndpointArn"])

    streamed = runtime.invoke_endpoint_with_response_stream(
        EndpointName=name,
        ContentType="application/json",
        Body=json.dumps({"inputs": "Hello", "parameters": {"max_new_tokens": 6}}),
    )
    lines = [
        json.loads(line)
        for event in streamed["Body"]
        for line in event["PayloadPart"]["Bytes"].decode().splitlines()
        if line.strip()
    ]
    assert "generated_text" in lines[-1]
    assert lines[-1]["generated_text"] == "".join(line["token"]["text"] for line in lines[:-1])

    # A model error keeps its status and message; the endpoint keeps serving.
    with pytest.raises(ClientError) as raised:
        runtime.invoke_endpoint(EndpointName=name, Body=json.dumps({"prompt": "x", "max_tokens": 0}))
    assert raised.value.response["Error"]["Code"] == "ModelError"
    assert raised.value.response["OriginalStatusCode"] == 400
    assert "max_tokens" in raised.value.response["OriginalMessage"]
    with pytest.raises(ClientError) as raised:
        runtime.invoke_endpoint(EndpointName=name, Body=b"{not json")
    assert _error(raised)[0] == "ValidationError"
    with pytest.raises(ClientError) as raised:
        runtime.invoke_endpoint(EndpointName="absent", Body=b"{}")
    assert _error(raised) == (
        "ValidationError",
        f"Endpoint absent of account {worker_account.aws_account_id} not found.",
    )

    # A crashed instance is restarted; requests keep being answered meanwhile.
    victim = rows[0]
    kill(instance_pid(victim))
    for _ in range(3):
        assert invoke_json(runtime, name, {"inputs": "Still there?", "parameters": {"max_new_tokens": 3}})
    wait_for(
        lambda: any(
            row.ordinal == victim.ordinal and row.restarts == 1 and row.status == "InService"
            for row in instances(worker_session_factory, worker_account, name)
        ),
        timeout=120,
        what="the killed instance to be restarted",
    )

    pids = [instance_pid(row) for row in instances(worker_session_factory, worker_account, name)]
    worker_sagemaker.delete_endpoint(EndpointName=name)
    worker_sagemaker.get_waiter("endpoint_deleted").wait(
        EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 90}
    )
    wait_for(lambda: not any(_alive(pid) for pid in pids), timeout=30, what="the instances to stop")


def test_the_aws_cli_deploys_and_invokes(  # noqa: PLR0917 - fixtures
    endpoint_worker: ManagedProcess,
    worker_sagemaker: Any,
    worker_api_url: str,
    worker_account: AccountCredentials,
    uploaded: tuple[str, str],
    tmp_path: Path,
) -> None:
    """create-endpoint-config → create-endpoint → wait endpoint-in-service → invoke-endpoint, verbatim."""
    model_uri, _ = uploaded
    _, model = deploy(worker_sagemaker, model_uri=model_uri, head_uri=None)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "AWS_ACCESS_KEY_ID": worker_account.access_key_id,
        "AWS_SECRET_ACCESS_KEY": worker_account.secret_access_key,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }

    def aws(*args: str) -> str:
        completed = subprocess.run(
            [str(AWS_CLI), *args, "--endpoint-url", worker_api_url],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
        return completed.stdout

    aws(
        "sagemaker",
        "create-endpoint-config",
        "--endpoint-config-name",
        "cli-config",
        "--production-variants",
        f"VariantName=AllTraffic,ModelName={model},InstanceType=ml.m5.xlarge,InitialInstanceCount=1",
    )
    aws(
        "sagemaker",
        "create-endpoint",
        "--endpoint-name",
        "cli-endpoint",
        "--endpoint-config-name",
        "cli-config",
    )
    wait_in_service(worker_sagemaker, "cli-endpoint")  # boto3 polls every second; the CLI every 30 s
    aws("sagemaker", "wait", "endpoint-in-service", "--endpoint-name", "cli-endpoint")
    out = tmp_path / "answer.json"
    aws(
        "sagemaker-runtime",
        "invoke-endpoint",
        "--endpoint-name",
        "cli-endpoint",
        "--content-type",
        "application/json",
        "--body",
        json.dumps({"inputs": "The sky is", "parameters": {"max_new_tokens": 5}}),
        str(out),
    )
    assert isinstance(json.loads(out.read_text())[0]["generated_text"], str)
    aws("sagemaker", "delete-endpoint", "--endpoint-name", "cli-endpoint")


def _requests_served(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("eaglenest:request_success_total")
        or line.startswith("eaglenest:requests_finished_total")
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def _check_metrics_and_dashboard(api_url: str, account: AccountCredentials, name: str, arn: str) -> None:
    """Per-endpoint metrics (the api's count of invocations, the instances' acceptance length)
    and the dashboard's endpoints route, after 7 answered invocations."""
    exposition = httpx.get(f"{api_url}/metrics", timeout=10).text
    assert f'eaglenest_endpoint_invocations_total{{code="200",endpoint="{arn}"}} 7.0' in exposition
    assert f'eaglenest_endpoint_instances_answering{{endpoint="{arn}"}} 2.0' in exposition
    assert f'eaglenest_endpoint_acceptance_length{{endpoint="{arn}"}}' in exposition
    page = rest_call("GET", api_url, "/dashboard/api/endpoints", account, region=WORKER_REGION).json()
    (entry,) = [e for e in page["Endpoints"] if e["Endpoint"]["EndpointName"] == name]
    assert entry["Endpoint"]["EndpointStatus"] == "InService"
    assert [i["Status"] for i in entry["Instances"]] == ["InService", "InService"]
    assert entry["Live"]["InstancesAnswering"] == 2
    assert entry["Live"]["GeneratedTokens"] > 0
    assert entry["Live"]["AcceptanceLength"] >= 1.0


def test_an_endpoint_whose_model_cannot_be_read_fails_with_the_reason(
    endpoint_worker: ManagedProcess, worker_sagemaker: Any, s3_bucket: str
) -> None:
    empty = f"s3://{s3_bucket}/models/nothing-here/"
    name, _ = deploy(worker_sagemaker, model_uri=empty, head_uri=None)
    with pytest.raises(WaiterError) as raised:
        worker_sagemaker.get_waiter("endpoint_in_service").wait(
            EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
    assert "Failed" in str(raised.value)
    described = worker_sagemaker.describe_endpoint(EndpointName=name)
    assert described["EndpointStatus"] == "Failed"
    assert described["FailureReason"] == f"No model files under {empty}"
    # A failed endpoint has no supervisor: it is deleted at once.
    worker_sagemaker.delete_endpoint(EndpointName=name)
    with pytest.raises(ClientError) as missing:
        worker_sagemaker.describe_endpoint(EndpointName=name)
    assert _error(missing)[0] == "ValidationException"
