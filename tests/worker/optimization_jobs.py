"""What the end-to-end job tests share: the inputs a test puts on S3, the request they send, and
how they wait for a job's outcome (boto3 → api process → Redis → a real Celery worker)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.worker.published_outputs import Published, read_published
from tests.worker.tiny_inputs import put_text, upload_directory
from tests.worker.worker_jobs import WorkerJobs

FINISHED = {"COMPLETED", "FAILED", "STOPPED"}
# The stages a whole job goes through, in order (one list, so a new stage is one edit).
JOB_STAGES = ["validate", "data", "prepare", "base", "distil", "train", "benchmark", "publish"]
# One optimizer step (the trainer keeps 15 s of any budget for its export) and a short benchmark.
QUICK_TRAINING = {"EAGLE_TRAIN_MAX_MINUTES": "0.05", "EAGLE_NUM_SPECULATIVE_TOKENS": "3"}
# A deadline for "eventually", not a speed target: on a slow 2-core AVX2 VM, beside the suite's
# other two processes, a retraining job on the built-in datasets was still running at 240 s.
JOB_TIMEOUT = 480.0
# The one dataset of the operator's catalog the `builtin_catalog` fixture lists.
BUILTIN_DATASET = "tiny_chat"


@dataclass(frozen=True)
class Inputs:
    """S3 (a fresh bucket) and the tiny target and head a test puts there."""

    s3: Any
    bucket: str
    target_dir: Path
    head_dir: Path
    tmp: Path

    def model(self, prefix: str = "models/tiny") -> str:
        return upload_directory(self.s3, self.target_dir, self.bucket, prefix)

    def head(self, prefix: str = "heads/base") -> str:
        return upload_directory(self.s3, self.head_dir, self.bucket, prefix)

    def text(self, key: str, body: str) -> str:
        return put_text(self.s3, self.bucket, key, body)

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def published(self, output_uri: str, job: dict[str, Any]) -> Published:
        return read_published(
            self.s3, output_uri, job_arn=job["OptimizationJobArn"], target_dir=self.target_dir, tmp=self.tmp
        )


def create_job(
    jobs: WorkerJobs,
    *,
    model_source: dict[str, Any],
    output_uri: str,
    data_source: dict[str, str] | None = None,
    environment: dict[str, str] | None = None,
    output_model: str | None = None,
    max_runtime: int = 900,
) -> str:
    """CreateOptimizationJob for an EAGLE head (QUICK_TRAINING unless ``environment`` is given)."""
    speculative: dict[str, Any] = {"Technique": "EAGLE"}
    if data_source is not None:
        speculative["TrainingDataSource"] = data_source
    output: dict[str, Any] = {"S3OutputLocation": output_uri}
    if output_model is not None:
        output["SageMakerModel"] = {"ModelName": output_model}
    return jobs.create_request(
        ModelSource=model_source,
        OptimizationEnvironment=QUICK_TRAINING if environment is None else environment,
        OptimizationConfigs=[{"ModelSpeculativeDecodingConfig": speculative}],
        OutputConfig=output,
        StoppingCondition={"MaxRuntimeInSeconds": max_runtime},
    )


def sagemaker_model_source(
    jobs: WorkerJobs, model_uri: str, channels: list[tuple[str, str]]
) -> dict[str, Any]:
    """CreateModel with the base model as ModelDataSource and extra channels; the job's ModelSource."""
    name = f"base-{uuid.uuid4().hex[:8]}"
    jobs.sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn="arn:aws:iam::111122223333:role/SageMakerRole",
        PrimaryContainer={
            "Image": "example.com/lmi:1",
            "ModelDataSource": {
                "S3DataSource": {"S3Uri": model_uri, "S3DataType": "S3Prefix", "CompressionType": "None"}
            },
            "AdditionalModelDataSources": [
                {
                    "ChannelName": channel,
                    "S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": "None"},
                }
                for channel, uri in channels
            ],
        },
    )
    return {"SageMakerModel": {"ModelName": name}}


def completed(jobs: WorkerJobs, name: str) -> dict[str, Any]:
    """The job once it has finished, asserted COMPLETED (its FailureReason shown otherwise)."""
    job = jobs.wait_for(name, FINISHED, timeout=JOB_TIMEOUT)
    assert job["OptimizationJobStatus"] == "COMPLETED", job.get("FailureReason")
    return job


def failure_reason(jobs: WorkerJobs, name: str) -> str:
    """The FailureReason of a job that must end FAILED."""
    job = jobs.wait_for(name, FINISHED, timeout=JOB_TIMEOUT)
    assert job["OptimizationJobStatus"] == "FAILED"
    return str(job["FailureReason"])


def stage_names(jobs: WorkerJobs, name: str) -> list[str]:
    """The stages the job's events record, in the order it entered them."""
    with_stage = [message for _, message in jobs.events(name) if message.startswith("Stage '")]
    return [message.split("'")[1] for message in with_stage]
