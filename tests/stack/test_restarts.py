"""`eaglenest up` survives its parts: kill -9 of the api and of the worker while a job trains.

The stack restarts each (stack.json counts it), SeaweedFS keeps running, and the job, taken
over by the new worker once its lease runs out, resumes from its checkpoint and completes.
Also checks what the stack leaves on disk: the state directory and its files are the owner's.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import psutil
import pytest
from botocore.config import Config

from stack.ports import free_port
from stack.stack_file import StackInfo, read_stack_file, stack_file_path
from tests.worker.tiny_inputs import put_text, sharegpt_jsonl, upload_directory

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TERMINAL = {"COMPLETED", "FAILED", "STOPPED"}
# Tiny budgets (as the worker tests use) and a short lease, so the killed worker's job is
# taken over within seconds.
STACK_ENV = {
    "EAGLENEST_JOB_LEASE_SECONDS": "5",
    "EAGLENEST_JOB_REAPER_INTERVAL_SECONDS": "1",
    "EAGLENEST_TRAIN_OVERRIDES": json.dumps(
        {"batch_tokens": 512, "num_threads": 1, "checkpoint_every": 2, "regenerate": False}
    ),
    # The job's first run on the model builds its base head (Base EAGLE) from a few self-instruct
    # prompts. The tiny random target writes none worth keeping, so the build has no samples:
    # the job must go on without a Base EAGLE row (it failed in stage base before) and reach its
    # own training within the test's waits.
    "EAGLENEST_BASE_HEAD_TRAIN_OVERRIDES": json.dumps(
        {"self_instruct_conversations": 8, "max_steps": 4, "num_threads": 1, "checkpoint_every": 2}
    ),
    "EAGLENEST_BENCHMARK_OVERRIDES": json.dumps(
        {
            "max_prompts": 2,
            "max_tokens": 8,
            "num_threads": 1,
            "concurrency": [1],
            "requests_per_level": 2,
            "k_sweep": [],
        }
    ),
}


class Stack:
    def __init__(self, process: subprocess.Popen[bytes], state_dir: Path, output: Path) -> None:
        self.process = process
        self.state_dir = state_dir
        self.output = output

    @property
    def info(self) -> StackInfo:
        return read_stack_file(self.state_dir)

    def client(self, service: str, endpoint_url: str) -> Any:
        info = self.info
        return boto3.client(
            service,
            endpoint_url=endpoint_url,
            aws_access_key_id=info.aws_access_key_id,
            aws_secret_access_key=info.aws_secret_access_key,
            region_name=info.region,
            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10),
        )

    def child(self, marker: str) -> psutil.Process:
        """The stack's direct child whose command line contains ``marker``."""
        for child in psutil.Process(self.process.pid).children():
            if any(marker in part for part in child.cmdline()):
                return child
        raise AssertionError(f"no child process runs {marker}")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    state_dir, output = tmp_path / "state", tmp_path / "up.out"
    env = {key: value for key, value in os.environ.items() if not key.startswith("EAGLENEST_")}
    command = [sys.executable, "-m", "cli.main", "up", "--state-dir", str(state_dir)]
    with output.open("wb") as sink:
        process = subprocess.Popen(
            [*command, "--port", str(free_port()), "--s3-port", "0"],
            cwd=PROJECT_ROOT,
            env={**env, **STACK_ENV},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while not stack_file_path(state_dir).exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"eaglenest up did not start (exit {process.poll()}):\n{output.read_text()}")
            time.sleep(0.2)
        yield Stack(process, state_dir, output)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def wait_for(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = check()
        except Exception:  # the api restarting: connection refused
            result = None
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def owner_only(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


def test_a_killed_api_and_worker_are_restarted_and_the_running_job_completes(
    stack: Stack, tiny_smollm2_target_dir: Path
) -> None:
    info = stack.info
    s3 = stack.client("s3", info.s3_endpoint_url)
    sagemaker = stack.client("sagemaker", info.api_url)
    s3.create_bucket(Bucket="models")
    model_uri = upload_directory(s3, tiny_smollm2_target_dir, "models", "tiny")
    put_text(s3, "models", "data/train.jsonl", sharegpt_jsonl(300))
    sagemaker.create_optimization_job(
        OptimizationJobName="survivor",
        RoleArn="arn:aws:iam::000000000000:role/eaglenest",
        ModelSource={"S3": {"S3Uri": model_uri}},
        DeploymentInstanceType="ml.g5.2xlarge",
        OptimizationEnvironment={"EAGLE_TRAIN_MAX_MINUTES": "0.6"},
        OptimizationConfigs=[
            {
                "ModelSpeculativeDecodingConfig": {
                    "Technique": "EAGLE",
                    "TrainingDataSource": {"S3Uri": "s3://models/data/", "S3DataType": "S3Prefix"},
                }
            }
        ],
        OutputConfig={"S3OutputLocation": "s3://models/out/"},
        StoppingCondition={"MaxRuntimeInSeconds": 900},
    )

    def status() -> str:
        job = sagemaker.describe_optimization_job(OptimizationJobName="survivor")
        return str(job["OptimizationJobStatus"])

    wait_for("the job to start", lambda: status() == "INPROGRESS", timeout=120)
    api = stack.child("uvicorn")
    api.kill()
    wait_for("the api to be restarted", lambda: stack.info.restarts.get("api") == 1, timeout=30)
    assert wait_for("the api to answer again", status, timeout=30) in {"INPROGRESS", "COMPLETED"}
    assert stack.child("uvicorn").pid != api.pid

    def checkpoint_staged() -> bool:
        listed = s3.list_objects_v2(Bucket="models", Prefix="out/_staging/")
        return any(item["Key"].endswith("checkpoints/latest") for item in listed.get("Contents", []))

    wait_for("a training checkpoint", checkpoint_staged, timeout=120)
    worker = stack.child("celery")
    worker.kill()  # its pool process, mid-training, is killed by the stack before the restart
    wait_for("the worker to be restarted", lambda: stack.info.restarts.get("worker") == 1, timeout=30)

    final = wait_for("the job to finish", lambda: status() in TERMINAL and status(), timeout=300)
    job = sagemaker.describe_optimization_job(OptimizationJobName="survivor")
    assert final == "COMPLETED", job.get("FailureReason")
    assert stack.process.poll() is None, "the stack kept running"
    assert stack.info.restarts == {"api": 1, "worker": 1}
    output = stack.output.read_text()
    assert "api exited with status -9; restarting it in 1.0 s" in output
    assert "worker exited with status -9; restarting it in 1.0 s" in output
    assert "worker exited with status -9; restarting it" in Path(stack.info.logs["worker"]).read_text()

    # Secrets at rest: the state directory and what the stack wrote in it are the owner's.
    state_dir = stack.state_dir
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    written = [
        state_dir / "secret.key",
        state_dir / "stack.json",
        state_dir / "eaglenest.sqlite3",
        state_dir / "eaglenest.sqlite3-wal",
        *(state_dir / "logs").iterdir(),
    ]
    assert [path.name for path in written if not owner_only(path)] == []
