"""Optimization jobs end to end: boto3 → api process → Redis → a real Celery worker → SeaweedFS.

The four workflows that complete (a job that must fail is in test_jobs_failures_e2e). One worker
serves the whole module. Every job trains a tiny random Llama (with SmolLM2's
real tokenizer) for a few seconds, benchmarks it and publishes; the published layout is
read back and checked file by file against lineage.json.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from db.settings import Settings
from stack.processes import ManagedProcess
from tests.fixtures.worker import module_worker
from tests.worker.optimization_jobs import (
    BUILTIN_DATASET,
    JOB_STAGES,
    QUICK_TRAINING,
    Inputs,
    completed,
    create_job,
    sagemaker_model_source,
    stage_names,
)
from tests.worker.published_outputs import Published
from tests.worker.tiny_inputs import sharegpt_jsonl
from tests.worker.worker_jobs import WorkerJobs

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def e2e_worker(
    worker_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    # No EAGLE before and after the heads, as a job runs by default (the session's worker
    # measures it once): these jobs check the repeated run and the drift guard it feeds.
    overrides = {**worker_settings.benchmark_overrides, "repeat_baseline": True}
    settings = worker_settings.model_copy(update={"benchmark_overrides": overrides})
    with module_worker(settings, tmp_path_factory, "e2e") as process:
        yield process


@pytest.fixture
def jobs(worker_jobs: WorkerJobs, e2e_worker: ManagedProcess) -> WorkerJobs:
    assert e2e_worker.is_running(), e2e_worker.log_tail()
    return worker_jobs


def _check_recommendation(results: dict[str, Any]) -> None:
    """Per level: the fastest head configuration when it beats No EAGLE by the margin, else No EAGLE."""
    recommendation = results["recommendation"]
    assert [level["concurrency"] for level in recommendation["levels"]] == results["concurrency_levels"]
    margin = recommendation["min_speedup"]
    for level in recommendation["levels"]:
        at_level = [row for row in results["rows"] if row["concurrency"] == level["concurrency"]]
        best = max((row for row in at_level if row["head_dir"]), key=lambda row: row["output_throughput"])
        assert level["best_speculative"] == best["configuration"]
        assert level["no_eagle_spread"] >= 1.0  # No EAGLE ran before and after the heads
        if best["speedup_vs_no_eagle"] >= margin:
            assert level["enable_speculative_decoding"] is True
            assert level["configuration"] == best["configuration"]
        else:
            assert level["enable_speculative_decoding"] is False
            assert level["configuration"] == "No EAGLE"
            assert level["speedup_vs_no_eagle"] == 1.0
    assert recommendation["summary"].startswith("concurrency 1: ")


def _check_benchmark(published: Published, *, model_uri: str, output_uri: str) -> None:
    """results.json, results.csv and lineage of a from-scratch job's serving benchmark."""
    # A row per configuration and concurrency level (the test worker's levels are 1 and 2).
    results = published.results
    rows = {(row["configuration"], row["concurrency"]): row for row in results["rows"]}
    # The trained head adaptive (its engine's default) and at the job's K=3 (the test worker's
    # k_sweep is empty; a real job also sweeps K=1..5).
    # No EAGLE is measured again after the heads, to see drift in the machine's load.
    configurations = ("No EAGLE", "Trained EAGLE", "Trained EAGLE (K=3)", "No EAGLE (repeat)")
    assert list(rows) == [(name, level) for name in configurations for level in (1, 2)]
    assert results["concurrency_levels"] == [1, 2]
    assert results["engine"] == "eaglenest"
    assert results["load_generator"].startswith("guidellm")
    assert results["num_speculative_tokens"] == 3  # the job's EAGLE_NUM_SPECULATIVE_TOKENS
    assert results["model"] == model_uri
    assert results["prompt_source"] == "held-out conversations (never trained on)"
    assert "artifacts" not in results  # the worker's local paths are not published
    for (configuration, _), row in rows.items():
        # guidellm counts a cancelled request as processed (scheduler/worker_group.py): on a loaded
        # machine its processes can create one request past max_requests, cancel it, and end the
        # level after one success. What the engine answers for: no request it served errored.
        assert 1 <= row["successful_requests"] <= 2
        assert row["errored_requests"] == 0
        assert row["output_tokens_mean"] == 8
        assert row["ttft_ms"] > 0
        assert row["output_throughput"] > 0
        if configuration.startswith("No EAGLE"):
            assert row["speedup_vs_no_eagle"] <= 1.0  # against the faster of its two runs
            assert row["mean_acceptance_length"] is None
            assert row["head_dir"] is None
        else:
            assert row["head_dir"] == output_uri + "eagle_model/"
            assert row["speedup_vs_no_eagle"] > 0
    for level in (1, 2):
        fixed = rows[("Trained EAGLE (K=3)", level)]
        assert 1.0 <= fixed["mean_acceptance_length"] <= 4.0
        assert len(fixed["acceptance_by_position"]) == 3
        assert fixed["num_speculative_tokens"] == 3
        assert rows[("Trained EAGLE", level)]["adaptive"] is True
    _check_recommendation(results)
    assert [(row["configuration"], row["concurrency"]) for row in published.csv_rows] == [
        (name, str(level)) for name, level in rows
    ]
    assert published.lineage["benchmark"]["concurrency_levels"] == [1, 2]
    assert published.lineage["benchmark"]["requests_per_level"] == 2


# ---------------------------------------------------------------------------- the four workflows


def test_from_scratch_on_own_data_publishes_head_benchmark_metrics_and_lineage(
    jobs: WorkerJobs, inputs: Inputs
) -> None:
    model_uri = inputs.model()
    inputs.text("data/train/part-0.jsonl", sharegpt_jsonl(20))
    inputs.text("data/train/README.txt", "not data: ignored")
    output_uri = inputs.uri("out/job-1/")
    output_model = f"optimized-{uuid.uuid4().hex[:8]}"

    name = create_job(
        jobs,
        model_source={"S3": {"S3Uri": model_uri}},
        data_source={"S3Uri": inputs.uri("data/train/"), "S3DataType": "S3Prefix"},
        output_uri=output_uri,
        output_model=output_model,
    )
    job = completed(jobs, name)

    published = inputs.published(output_uri, job)
    lineage = published.lineage
    config_etag = inputs.s3.head_object(Bucket=inputs.bucket, Key="models/tiny/config.json")["ETag"].strip(
        '"'
    )
    assert lineage["source_model"]["uri"] == model_uri
    assert {"uri": model_uri + "config.json", "etag": config_etag} in [
        {"uri": item["uri"], "etag": item["etag"]} for item in lineage["source_model"]["objects"]
    ]
    assert lineage["source_model"]["architecture"] == "LlamaForCausalLM"
    # The tiny target has tokenizer.json but no vocab.json: a warning, not a failure.
    assert (
        f"{model_uri}vocab.json is missing (the vocabulary is in tokenizer.json)"
        in (lineage["source_model"]["warnings"])
    )
    data = lineage["training_data"]
    assert data["source"] == "S3Prefix"
    assert [item["uri"] for item in data["objects"]] == [inputs.uri("data/train/part-0.jsonl")]
    assert data["records"]["records_read"] == 20
    assert data["records"]["records_skipped"] == 0
    assert lineage["base_head"] is None
    assert lineage["hyperparameters"]["model_dir"] == model_uri
    assert lineage["hyperparameters"]["data_paths"] == [inputs.uri("data/train/part-0.jsonl")]
    assert lineage["training"]["steps"] >= 1
    assert lineage["optimization_environment"] == QUICK_TRAINING
    assert lineage["code_version"]["package"] == "eaglenest"
    assert lineage["code_version"]["version"]
    assert lineage["output_model"]["name"] == output_model

    _check_benchmark(published, model_uri=model_uri, output_uri=output_uri)
    assert published.metrics[0]["step"] == 1
    assert "loss" in published.metrics[0]

    assert job["OptimizationOutput"]["RecommendedInferenceImage"] == "vllm/vllm-openai:latest"
    model = jobs.sagemaker.describe_model(ModelName=output_model)
    assert model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"] == model_uri
    assert model["PrimaryContainer"]["AdditionalModelDataSources"] == [
        {
            "ChannelName": "eagle_model",
            "S3DataSource": {
                "S3Uri": output_uri + "eagle_model/",
                "S3DataType": "S3Prefix",
                "CompressionType": "None",
            },
        }
    ]
    assert lineage["output_model"]["arn"] == model["ModelArn"]
    # A job event is recorded whenever the stage changes.
    assert stage_names(jobs, name) == JOB_STAGES


def test_from_scratch_on_the_builtin_datasets(jobs: WorkerJobs, builtin_catalog: str, inputs: Inputs) -> None:
    output_uri = inputs.uri("out/builtin/")

    name = create_job(jobs, model_source={"S3": {"S3Uri": inputs.model()}}, output_uri=output_uri)
    job = completed(jobs, name)

    data = inputs.published(output_uri, job).lineage["training_data"]
    assert data["source"] == "BuiltIn"
    assert data["builtin_datasets"] == [BUILTIN_DATASET]
    assert data["listed_by"]["uri"] == builtin_catalog
    assert data["records"]["records_read"] == 16


def test_an_existing_head_retrained_on_the_builtin_datasets(
    jobs: WorkerJobs, builtin_catalog: str, inputs: Inputs
) -> None:
    head_uri = inputs.head()
    source = sagemaker_model_source(jobs, inputs.model(), [("eagle_model", head_uri)])
    output_uri = inputs.uri("out/retrained/")

    name = create_job(jobs, model_source=source, output_uri=output_uri)
    job = completed(jobs, name)

    published = inputs.published(output_uri, job)
    lineage = published.lineage
    assert lineage["base_head"]["uri"] == head_uri
    assert lineage["base_head"]["origin"] == "eagle_model"
    assert lineage["base_head"]["sha256"] == {
        name: hashlib.sha256((inputs.head_dir / name).read_bytes()).hexdigest()
        for name in ("config.json", "model.safetensors")
    }
    assert lineage["base_head"]["trained_from"] is True
    assert lineage["base_head"]["validation"]["draft_vocab_size"] == 512
    assert lineage["hyperparameters"]["init_head_dir"] == head_uri
    assert lineage["training"]["draft_vocab_size"] == 512  # fine-tuning keeps the head's vocabulary
    assert lineage["training_data"]["source"] == "BuiltIn"
    rows = [(row["configuration"], row["concurrency"]) for row in published.results["rows"]]
    heads = ("Base EAGLE", "Base EAGLE (K=3)", "Trained EAGLE", "Trained EAGLE (K=3)")
    names = ("No EAGLE", *heads, "No EAGLE (repeat)")
    assert rows == [(name, level) for name in names for level in (1, 2)]
    assert {row["head_dir"] for row in published.results["rows"][2:6]} == {head_uri}
    # The source container's own image is the one to serve the new head with.
    assert job["OptimizationOutput"]["RecommendedInferenceImage"] == "example.com/lmi:1"


def test_a_tar_gz_model_and_head_fine_tuned_on_own_data_from_a_manifest(
    jobs: WorkerJobs, inputs: Inputs
) -> None:
    """Two workflows in one job (each whole job costs about two minutes of the suite): an
    existing head fine-tuned on own data listed by a manifest, and a model and head given as
    model.tar.gz objects (SageMaker's S3Object + Gzip), unpacked and trained on."""

    def packed(directory: Path, key: str) -> str:
        archive = inputs.tmp / key.replace("/", "-")
        with tarfile.open(archive, "w:gz") as tar:
            for path in sorted(directory.iterdir()):
                tar.add(path, arcname=path.name)
        inputs.s3.upload_file(str(archive), inputs.bucket, key)
        return inputs.uri(key)

    def gzip_object(uri: str) -> dict[str, str]:
        return {"S3Uri": uri, "S3DataType": "S3Object", "CompressionType": "Gzip"}

    model_uri = packed(inputs.target_dir, "packed/model.tar.gz")
    head_uri = packed(inputs.head_dir, "packed/head.tar.gz")
    inputs.text("corpus/a/chats.jsonl", sharegpt_jsonl(12))
    inputs.text("corpus/b/more.jsonl", sharegpt_jsonl(8, start=50))
    inputs.text("corpus/c/unlisted.jsonl", "not listed, never read\n")
    manifest = [{"prefix": inputs.uri("corpus/")}, "a/chats.jsonl", "b/more.jsonl"]
    manifest_uri = inputs.text("manifests/train.manifest", json.dumps(manifest))
    model_name = f"packed-{uuid.uuid4().hex[:8]}"
    jobs.sagemaker.create_model(
        ModelName=model_name,
        ExecutionRoleArn="arn:aws:iam::111122223333:role/SageMakerRole",
        PrimaryContainer={
            "Image": "example.com/lmi:1",
            "ModelDataSource": {"S3DataSource": gzip_object(model_uri)},
            "AdditionalModelDataSources": [
                {"ChannelName": "eagle_model", "S3DataSource": gzip_object(head_uri)}
            ],
        },
    )
    output_uri = inputs.uri("out/finetuned/")

    name = create_job(
        jobs,
        model_source={"SageMakerModel": {"ModelName": model_name}},
        data_source={"S3Uri": manifest_uri, "S3DataType": "ManifestFile"},
        output_uri=output_uri,
    )
    job = completed(jobs, name)

    lineage = inputs.published(output_uri, job).lineage
    data = lineage["training_data"]
    assert data["source"] == "ManifestFile"
    assert data["listed_by"]["uri"] == manifest_uri
    assert [item["uri"] for item in data["objects"]] == [
        inputs.uri("corpus/a/chats.jsonl"),
        inputs.uri("corpus/b/more.jsonl"),
    ]
    assert data["records"]["records_read"] == 20
    etag = inputs.s3.head_object(Bucket=inputs.bucket, Key="packed/model.tar.gz")["ETag"].strip('"')
    assert lineage["source_model"]["uri"] == model_uri
    assert [(item["uri"], item["etag"]) for item in lineage["source_model"]["objects"]] == [(model_uri, etag)]
    assert lineage["base_head"]["uri"] == head_uri
    assert lineage["hyperparameters"]["model_dir"] == model_uri
    assert lineage["hyperparameters"]["init_head_dir"] == head_uri
    assert lineage["training"]["steps"] >= 1
    assert stage_names(jobs, name) == JOB_STAGES
