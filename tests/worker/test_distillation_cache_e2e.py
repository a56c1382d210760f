"""Two jobs on the same model and data through the real pipeline with a distillation cache:
the second trains on what the first distilled (its lineage names the first job's part)."""

from __future__ import annotations

import pytest

from db.settings import Settings
from tests.fixtures.worker import StartCeleryWorker
from tests.worker.optimization_jobs import Inputs, completed, create_job
from tests.worker.tiny_inputs import sharegpt_jsonl
from tests.worker.worker_jobs import WorkerJobs

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


# Enough budget to distil the dozen conversations (8-token replies) and train a step.
DISTILLING = {"EAGLE_TRAIN_MAX_MINUTES": "0.2", "EAGLE_REGENERATE": "true"}


def test_a_second_job_reuses_what_the_first_distilled(
    worker_jobs: WorkerJobs, worker_settings: Settings, start_celery_worker: StartCeleryWorker, inputs: Inputs
) -> None:
    cache_uri = inputs.uri("distillation/")
    # Short replies: a random tiny target never ends one itself, and 256 tokens would take the budget.
    overrides = worker_settings.train_overrides | {"regenerate_max_new_tokens": 8}
    # One concurrency level and no fixed-K row (test_jobs_e2e checks the benchmark's layout):
    # the benchmark is most of a tiny job's time.
    benchmark = worker_settings.benchmark_overrides | {"concurrency": [1]}
    worker = start_celery_worker(
        distillation_cache_uri=cache_uri, train_overrides=overrides, benchmark_overrides=benchmark
    )
    model_uri = inputs.model()
    inputs.text("data/train/part-0.jsonl", sharegpt_jsonl(12))
    data = {"S3Uri": inputs.uri("data/train/"), "S3DataType": "S3Prefix"}

    lineages = []
    for number in (1, 2):
        output_uri = inputs.uri(f"out/job-{number}/")
        name = create_job(
            worker_jobs,
            model_source={"S3": {"S3Uri": model_uri}},
            data_source=data,
            output_uri=output_uri,
            environment=DISTILLING,
        )
        job = completed(worker_jobs, name)
        lineages.append(inputs.published(output_uri, job).lineage["distillation_cache"])
    assert worker.is_running(), worker.log_tail()

    first, second = lineages
    assert first["key"] == second["key"]
    assert first["uri"] == f"{cache_uri}{first['key']}/"
    assert first["reused"] == 0
    assert first["new"] > 0
    assert first["new_part"].startswith(f"{first['uri']}parts/")
    # Same split (same seed): every record the first job distilled is trained on again.
    assert second["reused"] == first["new"]
    assert second["reused_from"] == [{"uri": first["new_part"], "records": first["new"]}]
    assert second["new"] == 0
    assert second["new_part"] is None
    part_key = first["new_part"].removeprefix(f"s3://{inputs.bucket}/")
    assert inputs.s3.head_object(Bucket=inputs.bucket, Key=part_key)["ContentLength"] > 0
