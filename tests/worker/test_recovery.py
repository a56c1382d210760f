"""Control of a training job on a real worker: Stop mid-training, and a worker killed with -9.

Training here runs long enough to be interrupted: a few hundred conversations and a budget
of tens of seconds, checkpointing every two steps (the worker tests' train_overrides).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from db.models.optimization_job import OptimizationJob
from tests.api.signed_http import rest_call
from tests.fixtures.worker import StartCeleryWorker
from tests.worker.endpoint_clients import WORKER_REGION
from tests.worker.optimization_jobs import JOB_STAGES
from tests.worker.tiny_inputs import put_text, sharegpt_jsonl, upload_directory
from tests.worker.worker_jobs import WorkerJobs

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

FINISHED = {"COMPLETED", "FAILED", "STOPPED"}


@dataclass(frozen=True)
class TrainingJobs:
    """Jobs that train long enough to be interrupted, on a fresh bucket."""

    jobs: WorkerJobs
    s3: Any
    bucket: str
    target_dir: Path

    def start(self, *, minutes: str) -> str:
        model_uri = upload_directory(self.s3, self.target_dir, self.bucket, "models/tiny")
        put_text(self.s3, self.bucket, "data/train.jsonl", sharegpt_jsonl(300))
        return self.jobs.create_request(
            ModelSource={"S3": {"S3Uri": model_uri}},
            OptimizationEnvironment={"EAGLE_TRAIN_MAX_MINUTES": minutes},
            OptimizationConfigs=[
                {
                    "ModelSpeculativeDecodingConfig": {
                        "Technique": "EAGLE",
                        "TrainingDataSource": {
                            "S3Uri": f"s3://{self.bucket}/data/",
                            "S3DataType": "S3Prefix",
                        },
                    }
                }
            ],
            OutputConfig={"S3OutputLocation": f"s3://{self.bucket}/out/"},
            StoppingCondition={"MaxRuntimeInSeconds": 900},
        )

    def staged_checkpoint(self, job_id: int) -> str | None:
        """The name of the latest checkpoint mirrored to the job's staging prefix, if any."""
        key = f"out/_staging/job-{job_id}/train/checkpoints/latest"
        try:
            return str(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read().decode().strip())
        except self.s3.exceptions.NoSuchKey:
            return None

    def lineage(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(
            self.s3.get_object(Bucket=self.bucket, Key="out/lineage.json")["Body"].read()
        )
        return document


@pytest.fixture
def training(
    worker_jobs: WorkerJobs, s3_client: Any, s3_bucket: str, tiny_smollm2_target_dir: Path
) -> TrainingJobs:
    return TrainingJobs(worker_jobs, s3_client, s3_bucket, tiny_smollm2_target_dir)


def _training(job: OptimizationJob) -> bool:
    return job.stage == "train" and (job.last_message or "").startswith("training: step")


def _staged_checkpoint(s3_client: Any, bucket: str, job_id: int) -> str | None:
    key = f"out/_staging/job-{job_id}/train/checkpoints/latest"
    try:
        return str(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode().strip())
    except s3_client.exceptions.NoSuchKey:
        return None


def test_stop_during_training_checkpoints_and_ends_stopped_within_ten_seconds(
    training: TrainingJobs, start_celery_worker: StartCeleryWorker, worker_api_url: str
) -> None:
    start_celery_worker()
    jobs = training.jobs
    name = training.start(minutes="2")
    jobs.wait_until(name, _training, timeout=120)

    # The REST face shows the trainer's progress while it runs.
    detail = rest_call(
        "GET", worker_api_url, f"/v1/optimization-jobs/{name}", jobs.account, region=WORKER_REGION
    ).json()
    assert detail["Stage"] == "train"
    assert 0 < detail["ProgressPercent"] < 100
    assert detail["EtaSeconds"] is not None
    # The trainer checkpoints and evaluates every few steps here, so the message names whichever
    # of training, checkpointing or evaluating it is doing, always with the step it is at.
    assert re.match(r"(training: step|(checkpointing|evaluating) at step) \d+/\d+", detail["LastMessage"])
    # Validation warnings (files this tiny model lacks) are events of the validate stage too.
    stages = [event.get("Stage") for event in detail["Events"] if event.get("Stage")]
    assert list(dict.fromkeys(stages)) == JOB_STAGES[: JOB_STAGES.index("train") + 1]

    stopped_at = time.monotonic()
    jobs.stop(name)
    job = jobs.wait_for(name, FINISHED, timeout=15)

    assert job["OptimizationJobStatus"] == "STOPPED"
    assert time.monotonic() - stopped_at < 10
    # The trainer saved a checkpoint on its way out, and the worker mirrored it to S3.
    assert training.staged_checkpoint(jobs.row(name).id) is not None
    assert "Contents" not in training.s3.list_objects_v2(Bucket=training.bucket, Prefix="out/lineage.json")


def test_a_worker_killed_mid_training_is_replaced_and_the_job_resumes_from_its_checkpoint(
    training: TrainingJobs, start_celery_worker: StartCeleryWorker
) -> None:
    jobs = training.jobs
    first = start_celery_worker()
    name = training.start(minutes="0.6")
    job_id = jobs.wait_until(name, _training, timeout=120).id
    deadline = time.monotonic() + 90
    while training.staged_checkpoint(job_id) is None:
        assert time.monotonic() < deadline, "no checkpoint reached S3"
        time.sleep(0.2)

    os.killpg(first.pid, signal.SIGKILL)  # the worker and its pool process, mid-training
    first.wait_stopped()
    assert jobs.status(name) == "INPROGRESS"
    killed_at = time.monotonic()

    start_celery_worker()
    # Within a minute the new worker's reaper finds the job's lease expired and queues it
    # again (behind whatever else is queued), to resume from its checkpoint.
    while not any(
        "queued again to resume from its last checkpoint" in message for _, message in jobs.events(name)
    ):
        assert time.monotonic() - killed_at < 60, "the lost job was not taken over within a minute"
        time.sleep(0.2)
    job = jobs.wait_for(name, FINISHED, timeout=240)

    assert job["OptimizationJobStatus"] == "COMPLETED", job.get("FailureReason")
    messages = [message for _, message in jobs.events(name)]
    assert any("after its previous worker was lost" in message for message in messages)
    training_result = training.lineage()["training"]
    assert training_result["resumed_from_step"] is not None
    assert training_result["resumed_from_step"] >= 2
    assert training_result["steps"] > training_result["resumed_from_step"]


def test_a_bad_benchmark_override_fails_the_job_naming_the_field(
    training: TrainingJobs, start_celery_worker: StartCeleryWorker
) -> None:
    """The worker's benchmark settings are validated like the user's: a level of 0 requests
    in flight is a FAILED job that says which setting and field, not a crash or a hang."""
    start_celery_worker(benchmark_overrides={"concurrency": [1, 0]})
    name = training.start(minutes="0.05")

    job = training.jobs.wait_for(name, FINISHED, timeout=180)

    assert job["OptimizationJobStatus"] == "FAILED"
    reason = job["FailureReason"]
    assert "Invalid benchmark configuration (benchmark_overrides)" in reason
    assert "concurrency levels must be distinct and at least 1" in reason
    assert "Contents" not in training.s3.list_objects_v2(Bucket=training.bucket, Prefix="out/lineage.json")
