"""Base EAGLE through the real pipeline: the first job on a model builds its base head on the
built-in data and fine-tunes it on its own data; a later job on the built-in data reuses it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.s3 import S3Location
from core.s3_store import S3Store
from db.settings import Settings
from tests.fixtures.worker import StartCeleryWorker
from tests.worker.optimization_jobs import JOB_STAGES, Inputs, completed, create_job, stage_names
from tests.worker.published_outputs import Published
from tests.worker.tiny_inputs import sharegpt_jsonl
from tests.worker.worker_jobs import WorkerJobs
from worker.base_heads import BaseHeadStore

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.long]


# The base head: one step on the built-in data (no self-instruct: a tiny random target writes
# no usable prompts), in a budget just over the 10 s a build needs at least.
QUICK_BASE = {"self_instruct_conversations": 0, "regenerate": False, "max_steps": 1}


def _base_rows(published: Published) -> list[dict[str, Any]]:
    return [row for row in published.results["rows"] if row["configuration"].startswith("Base EAGLE")]


def test_the_first_job_builds_the_base_head_and_later_jobs_reuse_it(
    worker_jobs: WorkerJobs,
    worker_settings: Settings,
    start_celery_worker: StartCeleryWorker,
    builtin_catalog: str,
    inputs: Inputs,
) -> None:
    base_uri = inputs.uri("base-heads/")
    worker = start_celery_worker(
        base_heads_uri=base_uri,
        base_head_train_minutes=0.25,
        base_head_train_overrides=QUICK_BASE,
        benchmark_overrides=worker_settings.benchmark_overrides | {"concurrency": [1]},
    )
    model_uri = inputs.model()
    inputs.text("data/train/part-0.jsonl", sharegpt_jsonl(12))

    # 1. Own data, no head: the job builds the model's base head, then fine-tunes it.
    own_output = inputs.uri("out/own/")
    own_name = create_job(
        worker_jobs,
        model_source={"S3": {"S3Uri": model_uri}},
        data_source={"S3Uri": inputs.uri("data/train/"), "S3DataType": "S3Prefix"},
        output_uri=own_output,
    )
    own = inputs.published(own_output, completed(worker_jobs, own_name))
    assert stage_names(worker_jobs, own_name) == JOB_STAGES

    store = BaseHeadStore(S3Store(inputs.s3), S3Location.parse(base_uri, field="test"))
    [committed] = store.entries()
    assert not isinstance(committed, str), "a key without a committed build"
    base = own.lineage["base_head"]
    assert base["origin"] == "base_heads"
    assert base["uri"] == committed.location.uri
    assert base["sha256"] == committed.sha256
    assert base["store_key"] == committed.key
    assert base["built_by_this_job"] is True
    assert base["trained_from"] is True  # own data: fine-tuned from the base head
    assert own.lineage["hyperparameters"]["init_head_dir"] == committed.location.uri
    assert committed.manifest["built_by"] == own.lineage["job"]["arn"]
    assert committed.manifest["builtin_datasets"] == ["tiny_chat"]
    assert committed.manifest["model_uri"] == model_uri
    head_config = json.loads(
        inputs.s3.get_object(
            Bucket=committed.location.bucket, Key=committed.location.child("config.json").key
        )["Body"].read()
    )
    assert head_config["speculators_config"]["verifier"]["name_or_path"] == model_uri
    rows = _base_rows(own)
    assert rows, "no Base EAGLE row"
    assert {row["head_dir"] for row in rows} == {committed.location.uri}

    # 2. Built-in data: the base head is reused (not built again); the job's head starts afresh.
    builtin_output = inputs.uri("out/builtin/")
    builtin_name = create_job(
        worker_jobs, model_source={"S3": {"S3Uri": model_uri}}, output_uri=builtin_output
    )
    builtin = inputs.published(builtin_output, completed(worker_jobs, builtin_name))
    reused = builtin.lineage["base_head"]
    assert reused["uri"] == committed.location.uri
    assert reused["sha256"] == committed.sha256
    assert reused["built_by_this_job"] is False
    assert reused["trained_from"] is False
    assert builtin.lineage["hyperparameters"]["init_head_dir"] is None
    assert {row["head_dir"] for row in _base_rows(builtin)} == {committed.location.uri}
    assert store.find(committed.key) == committed  # still the first job's build
    assert worker.is_running(), worker.log_tail()
