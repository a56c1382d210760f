"""Captured traffic trains the next head: deploy with DataCaptureConfig, invoke, run an
optimization job on the capture prefix, then UpdateEndpoint to the model the job published.

Everything is real: the api process, an optimization-job worker and an endpoint worker, the
serving processes of the tiny target, SeaweedFS; only the training budget is tiny.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from db.settings import Settings
from tests.factories.accounts import AccountCredentials
from tests.fixtures.worker import launch_celery_worker, launch_endpoint_worker
from tests.worker.endpoint_clients import (
    deploy,
    instances,
    invoke_json,
    runtime_client,
    wait_for,
    wait_in_service,
)
from tests.worker.tiny_inputs import upload_directory
from tests.worker.worker_jobs import WorkerJobs

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

PROMPTS = [
    f"Tell me one fact about {topic}." for topic in ("rivers", "tea", "chess", "the moon", "bread", "bikes")
]


@pytest.fixture(scope="module")
def workers(worker_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    logs = tmp_path_factory.mktemp("capture-loop")
    jobs = launch_celery_worker(worker_settings, logs / "jobs.log", "jobs")
    endpoints = launch_endpoint_worker(worker_settings, logs / "endpoints.log", "endpoints")
    yield
    endpoints.stop()
    jobs.stop()


class Traffic(threading.Thread):
    """Invocations one after another until stopped, counting answers and failures."""

    def __init__(self, runtime: Any, name: str) -> None:
        super().__init__(daemon=True)
        self.runtime = runtime
        self.name = name
        self.answered = 0
        self.failures: list[str] = []
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.is_set():
            try:
                invoke_json(
                    self.runtime,
                    self.name,
                    {"inputs": "During the update", "parameters": {"max_new_tokens": 3}},
                )
                self.answered += 1
            except Exception as error:
                self.failures.append(repr(error))

    def stop(self) -> None:
        self._stopped.set()
        self.join(timeout=120)


def _capture_keys(s3_client: Any, bucket: str, prefix: str) -> list[str]:
    listed = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for item in listed.get("Contents", [])]


def _wait_for_captures(s3_client: Any, bucket: str, name: str, *, count: int) -> list[dict[str, Any]]:
    """The captured lines, in SageMaker's layout:
    <destination>/<endpoint>/<variant>/yyyy/mm/dd/hh/<id>.jsonl."""
    prefix = f"capture/{name}/AllTraffic/"
    lines: list[dict[str, Any]] = []

    def captured_all() -> bool:
        lines.clear()
        for key in _capture_keys(s3_client, bucket, prefix):
            body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
            lines.extend(json.loads(line) for line in body.splitlines())
        return len(lines) >= count

    wait_for(captured_all, timeout=60, what="the captured invocations on S3")
    return lines


def test_capture_then_train_then_update(  # noqa: PLR0917 - fixtures
    workers: None,
    worker_jobs: WorkerJobs,
    worker_api_url: str,
    worker_account: AccountCredentials,
    worker_session_factory: sessionmaker[Session],
    s3_client: Any,
    s3_bucket: str,
    tiny_smollm2_target_dir: Path,
) -> None:
    sagemaker = worker_jobs.sagemaker
    model_uri = upload_directory(s3_client, tiny_smollm2_target_dir, s3_bucket, "models/tiny")
    capture = {
        "EnableCapture": True,
        "InitialSamplingPercentage": 100,
        "DestinationS3Uri": f"s3://{s3_bucket}/capture",
        "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
    }
    name, model = deploy(sagemaker, model_uri=model_uri, head_uri=None, capture=capture)
    described = wait_in_service(sagemaker, name)
    assert described["DataCaptureConfig"]["CaptureStatus"] == "Started"
    runtime = runtime_client(worker_api_url, worker_account)
    sent: list[dict[str, Any]] = []
    for index in range(12):
        prompt = PROMPTS[index % len(PROMPTS)]
        if index % 2:
            body: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 12}
        else:
            body = {"inputs": prompt, "parameters": {"max_new_tokens": 12}}
        invoke_json(runtime, name, body)
        sent.append(body)

    lines = _wait_for_captures(s3_client, s3_bucket, name, count=12)
    assert len(lines) == 12
    # Every request is captured once with its answer; the capture files' order on S3 (by key,
    # flushed in batches) need not be the order the requests were sent in.
    captured = [json.loads(line["captureData"]["endpointInput"]["data"]) for line in lines]
    assert sorted(map(json.dumps, captured)) == sorted(map(json.dumps, sent))
    assert all(line["captureData"]["endpointOutput"]["mode"] == "OUTPUT" for line in lines)

    head_model = f"{model}-eagle"
    job = worker_jobs.create_request(
        ModelSource={"SageMakerModel": {"ModelName": model}},
        OptimizationEnvironment={"EAGLE_TRAIN_MAX_MINUTES": "0.05", "EAGLE_NUM_SPECULATIVE_TOKENS": "3"},
        OptimizationConfigs=[
            {
                "ModelSpeculativeDecodingConfig": {
                    "Technique": "EAGLE",
                    "TrainingDataSource": {"S3Uri": f"s3://{s3_bucket}/capture/", "S3DataType": "S3Prefix"},
                }
            }
        ],
        OutputConfig={
            "S3OutputLocation": f"s3://{s3_bucket}/out/",
            "SageMakerModel": {"ModelName": head_model},
        },
        StoppingCondition={"MaxRuntimeInSeconds": 900},
    )
    finished = worker_jobs.wait_until(job, lambda row: row.status.is_terminal, timeout=600)
    assert finished.status.value == "COMPLETED", finished.failure_reason

    config = f"with-head-{uuid.uuid4().hex[:8]}"
    sagemaker.create_endpoint_config(
        EndpointConfigName=config,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": head_model,
                "InstanceType": "ml.g5.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    # Requests keep being answered through the whole rollout: none is dropped.
    traffic = Traffic(runtime, name)
    traffic.start()
    sagemaker.update_endpoint(EndpointName=name, EndpointConfigName=config)
    assert sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"] == "Updating"
    updated = wait_in_service(sagemaker, name)
    time.sleep(4)  # past the old instance's drain and stop
    traffic.stop()
    assert traffic.failures == [], traffic.failures
    assert traffic.answered >= 3
    assert updated["EndpointConfigName"] == config
    assert "PendingDeploymentSummary" not in updated
    answer = invoke_json(runtime, name, {"inputs": "With the head", "parameters": {"max_new_tokens": 8}})
    assert isinstance(answer[0]["generated_text"], str)
    rows = instances(worker_session_factory, worker_account, name)
    assert [row.generation for row in rows] == [1]
    # The new instance drafts with the trained head (its engine counts drafted tokens).
    assert rows[0].url is not None
    metrics = httpx.get(f"{rows[0].url}/metrics", timeout=10).text
    drafted = [
        line
        for line in metrics.splitlines()
        if line.startswith("eaglenest:spec_decode_num_draft_tokens_total")
    ]
    assert drafted, metrics
    assert float(drafted[0].rsplit(" ", 1)[1]) > 0
    sagemaker.delete_endpoint(EndpointName=name)
    sagemaker.get_waiter("endpoint_deleted").wait(
        EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 90}
    )
