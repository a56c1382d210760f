"""A job with ``EAGLE_VARIANT=peagle`` trains, benchmarks and publishes a P-EAGLE head.

As ``test_jobs_architectures``: a tiny Llama, a few seconds of training, one concurrency
level with two requests; what differs is the head the job publishes and serves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from safetensors.torch import load_file

from db.settings import Settings
from stack.processes import ManagedProcess
from tests.fixtures.worker import launch_celery_worker
from tests.worker.published_outputs import read_published
from tests.worker.test_jobs_e2e import FINISHED
from tests.worker.tiny_inputs import put_text, sharegpt_jsonl, upload_directory
from tests.worker.worker_jobs import WorkerJobs

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

JOB_TIMEOUT = 300.0
REQUESTS = 2


@pytest.fixture(scope="module")
def peagle_worker(
    worker_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    overrides = {**worker_settings.benchmark_overrides, "concurrency": [1], "requests_per_level": REQUESTS}
    settings = worker_settings.model_copy(update={"benchmark_overrides": overrides})
    process = launch_celery_worker(
        settings, tmp_path_factory.mktemp("peagle-worker") / "worker.log", "peagle"
    )
    yield process
    process.stop()


@pytest.fixture
def jobs(worker_jobs: WorkerJobs, peagle_worker: ManagedProcess) -> WorkerJobs:
    assert peagle_worker.is_running(), peagle_worker.log_tail()
    return worker_jobs


def test_a_peagle_job_publishes_and_benchmarks_a_peagle_head(
    jobs: WorkerJobs, s3_client: Any, s3_bucket: str, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    model_uri = upload_directory(s3_client, tiny_llama_dir, s3_bucket, "models/tiny-peagle")
    put_text(s3_client, s3_bucket, "data/peagle/part-0.jsonl", sharegpt_jsonl(12))
    output_uri = f"s3://{s3_bucket}/out/peagle/"

    name = jobs.create_request(
        ModelSource={"S3": {"S3Uri": model_uri}},
        OptimizationEnvironment={
            "EAGLE_TRAIN_MAX_MINUTES": "0.05",
            "EAGLE_VARIANT": "peagle",
            "EAGLE_NUM_SPECULATIVE_TOKENS": "3",
        },
        OptimizationConfigs=[
            {
                "ModelSpeculativeDecodingConfig": {
                    "Technique": "EAGLE",
                    "TrainingDataSource": {
                        "S3Uri": f"s3://{s3_bucket}/data/peagle/",
                        "S3DataType": "S3Prefix",
                    },
                }
            }
        ],
        OutputConfig={"S3OutputLocation": output_uri},
        StoppingCondition={"MaxRuntimeInSeconds": 900},
    )
    job = jobs.wait_for(name, FINISHED, timeout=JOB_TIMEOUT)
    assert job["OptimizationJobStatus"] == "COMPLETED", job.get("FailureReason")

    published = read_published(
        s3_client,
        output_uri,
        job_arn=job["OptimizationJobArn"],
        target_dir=tiny_llama_dir,
        tmp=tmp_path,
        draft_variant="peagle",
    )
    config = json.loads((tmp_path / "eagle_model/config.json").read_text())
    assert config["architectures"] == ["PeagleLlamaForCausalLM"]
    assert config["speculators_model_type"] == "peagle"
    assert "mask_hidden" in load_file(str(tmp_path / "eagle_model/model.safetensors"))
    assert published.lineage["hyperparameters"]["variant"] == "peagle"
    trained = [row for row in published.results["rows"] if row["configuration"] == "Trained EAGLE"]
    assert trained
    assert all(row["output_throughput"] > 0 for row in trained)
    assert all(row["mean_acceptance_length"] >= 1.0 for row in trained)
