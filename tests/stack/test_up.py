"""`eaglenest up` as a user runs it: a subprocess, driven with the AWS CLI and boto3, then SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import psutil
import pytest
from botocore.exceptions import ClientError

from core.s3 import S3Location
from db.settings import Settings
from stack.embedded import EMBEDDED_BASE_HEADS_URI, EMBEDDED_DISTILLATION_CACHE_URI
from stack.stack_file import stack_file_path
from tests.stack.embedded_stack import PROJECT_ROOT, RunningStack, start_embedded_stack, wait_for_terminal
from worker.app import get_celery_app

pytestmark = pytest.mark.slow


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[RunningStack]:
    with start_embedded_stack(tmp_path) as running:
        yield running


def test_the_embedded_stack_serves_jobs_and_stops_cleanly(stack: RunningStack) -> None:
    info = stack.info
    assert stack_file_path(Path(info.state_dir)).exists()
    assert info.database_url.startswith("sqlite:///")
    assert (info.aws_access_key_id, info.aws_secret_access_key) == ("test", "test")

    # The real AWS CLI against the api.
    listed = subprocess.run(
        [
            str(Path(sys.executable).with_name("aws")),
            "sagemaker",
            "list-optimization-jobs",
            "--endpoint-url",
            info.api_url,
        ],
        env=stack.aws_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(listed.stdout) == {"OptimizationJobSummaries": []}

    # boto3 against the embedded SeaweedFS, with the same development credentials.
    s3 = stack.client("s3", info.s3_endpoint_url)
    s3.create_bucket(Bucket="models")
    s3.put_object(Bucket="models", Key="tiny/config.json", Body=b'{"model_type": "llama"}')
    s3.put_object(Bucket="models", Key="tiny/model.safetensors", Body=b"\x00" * 16)
    body = s3.get_object(Bucket="models", Key="tiny/config.json")["Body"].read()
    assert json.loads(body) == {"model_type": "llama"}

    # A job goes through the embedded worker, whose validation finds the model incomplete.
    sagemaker = stack.client("sagemaker", info.api_url)
    sagemaker.create_optimization_job(
        OptimizationJobName="embedded-job",
        RoleArn="arn:aws:iam::000000000000:role/eaglenest",
        ModelSource={"S3": {"S3Uri": "s3://models/tiny/"}},
        DeploymentInstanceType="ml.g5.2xlarge",
        OptimizationConfigs=[{"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}}],
        OutputConfig={"S3OutputLocation": "s3://models/output/"},
        StoppingCondition={"MaxRuntimeInSeconds": 600},
    )
    job = wait_for_terminal(sagemaker, "embedded-job")
    assert job["OptimizationJobStatus"] == "FAILED"
    assert job["FailureReason"].startswith(
        "s3://models/tiny/config.json: the model config declares no 'architectures' (model_type='llama')"
    )
    assert "OptimizationStartTime" in job

    # Stop's revoke travels through the filesystem broker's control folder to the worker.
    settings = Settings(
        broker_url="filesystem://", state_dir=Path(info.state_dir), result_backend="cache+memory://"
    )
    get_celery_app(settings).control.revoke("revoke-probe-task-id")
    worker_log = Path(info.logs["worker"])
    deadline = time.monotonic() + 20
    while "revoke-probe-task-id" not in worker_log.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "revoke-probe-task-id" in worker_log.read_text()

    # The stack made its distillation cache's bucket, which its own admin key reaches and the
    # development key does not.
    cache = _list_with_state_dir("distillation-cache", info.state_dir)
    assert cache.returncode == 0, cache.stdout + cache.stderr
    assert cache.stdout.strip() == f"{EMBEDDED_DISTILLATION_CACHE_URI}: no entries"
    with pytest.raises(ClientError, match="AccessDenied"):
        s3.list_objects_v2(Bucket=S3Location.parse(EMBEDDED_DISTILLATION_CACHE_URI, field="cache").bucket)
    # Its base heads are there too (none built yet), reached the same way.
    heads = _list_with_state_dir("base-heads", info.state_dir)
    assert heads.returncode == 0, heads.stdout + heads.stderr
    assert heads.stdout.strip() == f"{EMBEDDED_BASE_HEADS_URI}: no base heads"

    # SIGTERM stops everything: no child or grandchild survives, stack.json is gone.
    children = psutil.Process(stack.process.pid).children(recursive=True)
    assert {"weed", "python3", "python"} & {child.name() for child in children}
    assert len(children) >= 4  # seaweedfs, worker + its pool process, api
    stack.process.send_signal(signal.SIGTERM)
    assert stack.process.wait(timeout=60) == 0
    _, alive = psutil.wait_procs(children, timeout=10)
    assert [proc for proc in alive if proc.status() != psutil.STATUS_ZOMBIE] == []
    assert not stack_file_path(Path(info.state_dir)).exists()
    assert "SIGTERM received; stack stopped" in stack.output.read_text()


def test_each_account_reaches_only_its_own_buckets_and_its_jobs_s3_as_its_role(stack: RunningStack) -> None:
    info = stack.info
    other_id = "111122223333"
    dev = stack.client("s3", info.s3_endpoint_url)
    dev.create_bucket(Bucket="models")
    dev.put_object(Bucket="models", Key="tiny/config.json", Body=b'{"model_type": "llama"}')

    # A new account, as the README makes one, while the stack runs.
    created = subprocess.run(
        [
            str(Path(sys.executable).with_name("eaglenest")),
            "keys",
            "--state-dir",
            info.state_dir,
            "create",
            "--account-id",
            other_id,
        ],
        env={key: value for key, value in os.environ.items() if not key.startswith("EAGLENEST_")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    document = json.loads(created.stdout)
    other_role = f"arn:aws:iam::{other_id}:role/eaglenest"
    assert document["Role"] == {"Arn": other_role}
    key = document["AccessKey"]

    def other_client(service: str, endpoint_url: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=endpoint_url,
            aws_access_key_id=key["AccessKeyId"],
            aws_secret_access_key=key["SecretAccessKey"],
            region_name=info.region,
        )

    other_s3 = other_client("s3", info.s3_endpoint_url)
    deadline = time.monotonic() + 20  # the stack applies new keys within a few seconds
    while True:
        try:
            other_s3.list_buckets()
            break
        except ClientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
    with pytest.raises(ClientError) as denied:
        other_s3.get_object(Bucket="models", Key="tiny/config.json")
    assert denied.value.response["Error"]["Code"] == "AccessDenied"
    own_bucket = f"{other_id}-models"
    other_s3.create_bucket(Bucket=own_bucket)
    other_s3.put_object(Bucket=own_bucket, Key="note.txt", Body=b"mine")
    with pytest.raises(ClientError) as denied:
        dev.get_object(Bucket=own_bucket, Key="note.txt")
    assert denied.value.response["Error"]["Code"] == "AccessDenied"

    sagemaker = other_client("sagemaker", info.api_url)
    job = {
        "ModelSource": {"S3": {"S3Uri": "s3://models/tiny/"}},
        "DeploymentInstanceType": "ml.g5.2xlarge",
        "OptimizationConfigs": [{"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}}],
        "OutputConfig": {"S3OutputLocation": f"s3://{own_bucket}/out/"},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    }
    # The development account's role is not this account's to pass.
    with pytest.raises(ClientError) as refused:
        sagemaker.create_optimization_job(
            OptimizationJobName="borrowed-role", RoleArn="arn:aws:iam::000000000000:role/eaglenest", **job
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    # Its own role cannot read the development account's model: the job fails, naming only the URI.
    sagemaker.create_optimization_job(OptimizationJobName="cross-account", RoleArn=other_role, **job)
    failed = wait_for_terminal(sagemaker, "cross-account")
    assert failed["OptimizationJobStatus"] == "FAILED"
    assert failed["FailureReason"] == "S3 access denied listing s3://models/tiny/"
    assert (
        dev.get_object(Bucket="models", Key="tiny/config.json")["Body"].read() == b'{"model_type": "llama"}'
    )


def _list_with_state_dir(command: str, state_dir: str) -> subprocess.CompletedProcess[str]:
    """``eaglenest COMMAND list --state-dir``, with no EAGLENEST_* setting to lean on: the state
    directory alone must reach the store with the stack's own admin key."""
    return subprocess.run(
        [sys.executable, "-m", "cli.main", command, "list", "--state-dir", state_dir],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={key: value for key, value in os.environ.items() if not key.startswith("EAGLENEST_")},
        timeout=60,
        check=False,
    )
