"""The client shim against a live api and a real Celery worker: waiters, wait_for_job, downloads.

One stack and one real, tiny job (about ten seconds of training and benchmarking) serve the
whole module; a second job fails in validation, others are stopped after a second or two.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, WaiterError
from sqlalchemy.orm import Session, sessionmaker

import client.progress as progress_module
from client import (
    ChecksumMismatchError,
    OptimizationJobFailedError,
    OptimizationJobNotFinishedError,
    OptimizationJobNotFoundError,
    OptimizationJobWaiterError,
    benchmark_table,
    download_results,
    eaglenest_client,
    install_waiters,
    wait_for_job,
)
from db.queries.account import create_access_key
from db.session import session_scope
from stack.seaweedfs import S3Credentials, S3Identity
from tests.client.client_stack import ClientStack
from tests.factories.accounts import AccountCredentials
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.fixtures.live_server import LiveServer
from tests.fixtures.seaweedfs import SeaweedFSServer

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

WAITER = "optimization_job_completed_or_stopped"
# A real SmolLM2 job: a deadline for "eventually", not a speed target (a slow AVX2 VM took over 180 s).
JOB_TIMEOUT_SECONDS = 480
AWS_CLI = Path(sys.executable).with_name("aws")


@dataclass(frozen=True)
class CompletedJob:
    name: str
    status_when_waiter_started: str
    waiter_error: BaseException | None
    waiter_seconds: float
    description: dict[str, Any]
    progress_output: str


@pytest.fixture(scope="module")
def completed(client_stack: ClientStack) -> CompletedJob:
    """One real job, watched from creation to COMPLETED by the botocore waiter (in a thread)
    and by wait_for_job (here) at the same time."""
    client = client_stack.client()
    name = client_stack.create_job()
    status_at_start = client.describe_optimization_job(OptimizationJobName=name)["OptimizationJobStatus"]
    outcome: dict[str, Any] = {"error": None}

    def run_waiter() -> None:
        started = time.monotonic()
        try:
            client_stack.client().get_waiter(WAITER).wait(
                OptimizationJobName=name, WaiterConfig={"Delay": 1, "MaxAttempts": JOB_TIMEOUT_SECONDS}
            )
        except BaseException as error:
            outcome["error"] = error
        outcome["seconds"] = time.monotonic() - started

    waiter_thread = threading.Thread(target=run_waiter, name="waiter")
    waiter_thread.start()
    output = io.StringIO()
    try:
        description = wait_for_job(
            client, name, progress=True, poll_seconds=0.5, timeout_seconds=JOB_TIMEOUT_SECONDS, file=output
        )
    finally:
        waiter_thread.join(timeout=JOB_TIMEOUT_SECONDS)
    return CompletedJob(
        name=name,
        status_when_waiter_started=status_at_start,
        waiter_error=outcome["error"],
        waiter_seconds=outcome["seconds"],
        description=description,
        progress_output=output.getvalue(),
    )


@pytest.fixture(scope="module")
def failed_job(client_stack: ClientStack) -> str:
    """A job whose ModelSource prefix is empty: validation fails it within a second or two."""
    return client_stack.create_job(model_uri=f"s3://{client_stack.bucket}/models/nothing-here/")


def stop_and_wait(client_stack: ClientStack, name: str) -> None:
    client = client_stack.client()
    client.stop_optimization_job(OptimizationJobName=name)
    client.get_waiter(WAITER).wait(OptimizationJobName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})


# ------------------------------------------------------------------------------------ waiters


def test_waiter_waits_for_a_running_job_until_it_completes(completed: CompletedJob) -> None:
    assert completed.status_when_waiter_started in {"STARTING", "INPROGRESS"}
    assert completed.waiter_error is None, completed.waiter_error
    assert completed.waiter_seconds > 2  # it really waited for the job
    assert completed.description["OptimizationJobStatus"] == "COMPLETED"


def test_waiter_fails_on_a_failed_job_with_its_failure_reason(
    client_stack: ClientStack, failed_job: str
) -> None:
    with pytest.raises(OptimizationJobWaiterError) as caught:
        client_stack.client().get_waiter(WAITER).wait(
            OptimizationJobName=failed_job, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
    reason = client_stack.client().describe_optimization_job(OptimizationJobName=failed_job)["FailureReason"]
    assert reason
    assert isinstance(caught.value, WaiterError)  # callers catching botocore's error still do
    assert f"optimization job {failed_job!r} FAILED: {reason}" in str(caught.value)
    assert caught.value.failure_reason == reason
    assert caught.value.last_response["OptimizationJobStatus"] == "FAILED"


def test_waiter_fails_at_once_for_an_unknown_job(client_stack: ClientStack) -> None:
    started = time.monotonic()
    with pytest.raises(OptimizationJobWaiterError, match=r"no optimization job named 'no-such-job'"):
        client_stack.client().get_waiter(WAITER).wait(
            OptimizationJobName="no-such-job", WaiterConfig={"Delay": 5, "MaxAttempts": 10}
        )
    assert time.monotonic() - started < 5  # ResourceNotFound is terminal: no retry


def test_waiter_times_out_per_its_config_then_succeeds_once_the_job_is_stopped(
    client_stack: ClientStack,
) -> None:
    name = client_stack.create_job()
    client = client_stack.client()
    started = time.monotonic()
    with pytest.raises(
        OptimizationJobWaiterError, match=r"Max attempts exceeded.*is still (STARTING|INPROGRESS)"
    ):
        client.get_waiter(WAITER).wait(OptimizationJobName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 2})
    assert 1 <= time.monotonic() - started < 5  # two attempts, one delay between them
    with pytest.raises(OptimizationJobNotFinishedError, match=rf"'{name}' is (STARTING|INPROGRESS): results"):
        download_results(client, name, "unused", s3_endpoint_url=client_stack.s3_endpoint_url)
    stop_and_wait(client_stack, name)  # success on STOPPED
    assert client.describe_optimization_job(OptimizationJobName=name)["OptimizationJobStatus"] == "STOPPED"


# ------------------------------------------------------------------------------- wait_for_job


def test_wait_for_job_shows_stages_and_progress_and_returns_the_final_description(
    completed: CompletedJob,
) -> None:
    output = completed.progress_output
    for stage in ("train", "benchmark", "publish"):
        assert f"{completed.name}: stage {stage}" in output
    assert "100%" in output
    assert f"{completed.name}: COMPLETED" in output
    assert completed.description["OptimizationJobName"] == completed.name
    assert completed.description["OutputConfig"]["S3OutputLocation"].startswith("s3://")


def test_wait_for_job_raises_the_failure_reason(client_stack: ClientStack, failed_job: str) -> None:
    with pytest.raises(OptimizationJobFailedError) as caught:
        wait_for_job(client_stack.client(), failed_job, progress=False, poll_seconds=0.5, timeout_seconds=60)
    assert caught.value.failure_reason
    assert str(caught.value) == f"optimization job {failed_job!r} FAILED: {caught.value.failure_reason}"
    assert caught.value.description["OptimizationJobStatus"] == "FAILED"


def test_wait_for_job_names_an_unknown_job(client_stack: ClientStack) -> None:
    with pytest.raises(
        OptimizationJobNotFoundError, match=r"no optimization job named 'no-such-job' at http"
    ):
        wait_for_job(client_stack.client(), "no-such-job", progress=False)


def test_ctrl_c_leaves_the_job_running_and_says_how_to_stop_it(
    live_server: LiveServer, account: AccountCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The in-thread api has no worker on its queue, so the job stays STARTING: nothing to clean up.
    client = eaglenest_client(
        live_server.url, "us-west-2", (account.access_key_id, account.secret_access_key)
    )
    request = create_optimization_job_request(RoleArn=account.role_arn)
    client.create_optimization_job(**request)
    name = request["OptimizationJobName"]
    output = io.StringIO()
    # Ctrl-C lands while the waiter polls: the second describe raises KeyboardInterrupt, as
    # Python does for a SIGINT arriving during a blocking call. (Simulating the signal from a
    # thread with _thread.interrupt_main raced the poll loop on a loaded machine.)
    real_describe = progress_module.describe_job_progress
    calls = 0

    def describe_then_ctrl_c(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt
        return real_describe(*args, **kwargs)

    monkeypatch.setattr(progress_module, "describe_job_progress", describe_then_ctrl_c)

    with pytest.raises(KeyboardInterrupt):
        wait_for_job(client, name, progress=True, poll_seconds=0.2, timeout_seconds=30, file=output)
    assert calls == 2
    assert client.describe_optimization_job(OptimizationJobName=name)["OptimizationJobStatus"] == "STARTING"
    assert f"Optimization job {name} (STARTING) was NOT stopped and keeps running" in output.getvalue()
    assert f"aws sagemaker stop-optimization-job --optimization-job-name {name}" in output.getvalue()


# ------------------------------------------------------------------------------------ the CLI


def test_cli_waiter_after_install_waits_for_completed_and_fails_on_failed(
    client_stack: ClientStack, completed: CompletedJob, failed_job: str, tmp_path: Path
) -> None:
    install_waiters(tmp_path / "models")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "AWS_DATA_PATH": str(tmp_path / "models"),
        "AWS_ACCESS_KEY_ID": client_stack.account.access_key_id,
        "AWS_SECRET_ACCESS_KEY": client_stack.account.secret_access_key,
        "AWS_DEFAULT_REGION": client_stack.region,
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
    }

    def wait(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(AWS_CLI),
                "sagemaker",
                "wait",
                "optimization-job-completed-or-stopped",
                "--optimization-job-name",
                name,
                "--endpoint-url",
                client_stack.api_url,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    done = wait(completed.name)
    assert done.returncode == 0, done.stderr
    failed = wait(failed_job)
    assert failed.returncode == 255
    assert "Waiter OptimizationJobCompletedOrStopped failed" in failed.stderr
    assert 'matched expected path: "FAILED"' in failed.stderr


# ---------------------------------------------------------------------------------- downloads


def test_download_results_verifies_every_file_and_reads_the_benchmark_table(
    client_stack: ClientStack, completed: CompletedJob, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The S3 endpoint is discovered the way a user's would be, from the environment.
    monkeypatch.setenv("EAGLENEST_S3_ENDPOINT_URL", client_stack.s3_endpoint_url)
    results = download_results(client_stack.client(), completed.name, tmp_path / "results")

    assert results.lineage["job"]["arn"] == completed.description["OptimizationJobArn"]
    listed = {entry["path"]: entry for entry in results.lineage["outputs"]}
    assert set(listed) >= {
        "eagle_model/config.json",
        "eagle_model/model.safetensors",
        "benchmark/results.json",
    }
    for relative, entry in listed.items():
        body = (tmp_path / "results" / relative).read_bytes()
        assert hashlib.sha256(body).hexdigest() == entry["sha256"]
        assert results.files[relative] == tmp_path / "results" / relative
    assert (results.head_dir / "model.safetensors").is_file()
    assert (tmp_path / "results" / "lineage.json").is_file()

    rows = benchmark_table(results)
    assert {row["Configuration"] for row in rows} >= {"No EAGLE", "Trained EAGLE", "Trained EAGLE (K=3)"}
    # The job's EAGLE_NUM_SPECULATIVE_TOKENS row always drafts; the adaptive row may judge
    # drafting a loss on the tiny target and decode plainly, and then has no acceptance.
    adaptive = next(row for row in rows if row["Configuration"] == "Trained EAGLE")
    assert adaptive["Acceptance Length"] is None or adaptive["Acceptance Length"] >= 1
    trained = next(row for row in rows if row["Configuration"] == "Trained EAGLE (K=3)")
    assert trained["Concurrency"] == 1
    assert trained["Acceptance Length"] is not None
    assert trained["Acceptance Length"] >= 1
    assert trained["Output Throughput (tokens/s)"] > 0
    assert trained["TTFT (ms)"] is not None
    assert trained["TTFT (ms)"] > 0
    assert benchmark_table(tmp_path / "results") == rows


def test_results_command_prints_the_table_recommendation_and_lineage_of_a_finished_job(
    client_stack: ClientStack, completed: CompletedJob, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "EAGLENEST_ENDPOINT_URL": client_stack.api_url,
        "EAGLENEST_S3_ENDPOINT_URL": client_stack.s3_endpoint_url,
        "AWS_ACCESS_KEY_ID": client_stack.account.access_key_id,
        "AWS_SECRET_ACCESS_KEY": client_stack.account.secret_access_key,
        "AWS_DEFAULT_REGION": client_stack.region,
    }
    command = [sys.executable, "-m", "cli.main", "client", "results", completed.name, "--out", str(tmp_path)]

    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "| Configuration | Concurrency | TTFT (ms) |" in done.stdout
    assert any(line.startswith("| Trained EAGLE | 1 |") for line in lines)
    assert any(line.startswith("| No EAGLE | 1 |") for line in lines)
    assert "Deployment recommendation" in done.stdout
    assert "  concurrency 1: " in done.stdout
    assert f"Lineage of {completed.description['OptimizationJobArn']}" in done.stdout
    assert (tmp_path / "lineage.json").is_file()

    missing = subprocess.run(
        [*command[:5], "no-such-job"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith("eaglenest client results: ")
    assert "no-such-job" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_download_reports_a_corrupted_object_by_name(
    client_stack: ClientStack, completed: CompletedJob, tmp_path: Path
) -> None:
    bucket, _, prefix = (
        completed.description["OutputConfig"]["S3OutputLocation"].removeprefix("s3://").partition("/")
    )
    key = prefix.rstrip("/") + "/benchmark/results.csv"
    original = client_stack.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    client_stack.s3.put_object(Bucket=bucket, Key=key, Body=original + b"tampered\n")
    try:
        with pytest.raises(
            ChecksumMismatchError, match=r"checksum mismatch in benchmark/results\.csv under"
        ) as caught:
            download_results(
                client_stack.client(), completed.name, tmp_path, s3_endpoint_url=client_stack.s3_endpoint_url
            )
    finally:
        client_stack.s3.put_object(Bucket=bucket, Key=key, Body=original)
    assert [item.path for item in caught.value.mismatches] == ["benchmark/results.csv"]
    assert caught.value.mismatches[0].actual_size == len(original) + len(b"tampered\n")
    assert not (tmp_path / "benchmark" / "results.csv").exists()  # the bad copy is not left behind
    assert not (tmp_path / "lineage.json").exists()


def test_download_results_reads_s3_with_the_callers_credentials_only(  # noqa: PLR0917 - fixtures
    client_stack: ClientStack,
    completed: CompletedJob,
    seaweedfs_server: SeaweedFSServer,
    worker_session_factory: sessionmaker[Session],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A second key of the job's own account, which S3 lets reach none of the job's buckets.
    with session_scope(worker_session_factory) as session:
        key, secret = create_access_key(session, aws_account_id=client_stack.account.aws_account_id)
        key_id = key.access_key_id
    limited = S3Credentials(key_id, secret)
    seaweedfs_server.add_identity(S3Identity(f"limited-{key_id}", (limited,), (f"{key_id.lower()}-",)))
    # Keys that could read the output are at hand; the client must not fall back on them.
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "EAGLENEST_S3_ACCESS_KEY_ID"):
        monkeypatch.setenv(variable, "test")
    monkeypatch.setenv("EAGLENEST_S3_SECRET_ACCESS_KEY", "test")
    caller = eaglenest_client(client_stack.api_url, client_stack.region, (key_id, secret))

    with pytest.raises(ClientError) as denied:
        download_results(
            caller, completed.name, tmp_path / "out", s3_endpoint_url=client_stack.s3_endpoint_url
        )

    assert denied.value.response["Error"]["Code"] == "AccessDenied"
    assert not (tmp_path / "out").exists()


def test_download_refuses_a_failed_job_and_an_unknown_one(client_stack: ClientStack, failed_job: str) -> None:
    wait_for_failure = client_stack.client().get_waiter(WAITER)
    with pytest.raises(WaiterError):
        wait_for_failure.wait(OptimizationJobName=failed_job, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    with pytest.raises(
        OptimizationJobNotFinishedError, match=r"is FAILED: it published no results \(FailureReason"
    ):
        download_results(
            client_stack.client(), failed_job, "unused", s3_endpoint_url=client_stack.s3_endpoint_url
        )
    with pytest.raises(OptimizationJobNotFoundError, match="no optimization job named 'no-such-job'"):
        download_results(
            client_stack.client(), "no-such-job", "unused", s3_endpoint_url=client_stack.s3_endpoint_url
        )
