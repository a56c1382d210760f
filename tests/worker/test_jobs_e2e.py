"""Optimization jobs end to end: boto3 → api process → Redis → a real Celery worker → SeaweedFS.

One worker serves the whole module. Every job trains a tiny random Llama (with SmolLM2's
real tokenizer) for a few seconds, benchmarks it and publishes; the published layout is
read back and checked file by file against lineage.json.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.s3 import s3_client
from core.s3_store import S3Store
from db.settings import Settings
from stack.processes import ManagedProcess
from tests.fixtures.worker import launch_celery_worker
from tests.worker.published_outputs import Published, read_published, split
from tests.worker.tiny_inputs import put_text, sharegpt_jsonl, upload_directory
from tests.worker.worker_jobs import WorkerJobs
from worker.builtin_catalog import add_dataset, catalog_location

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

FINISHED = {"COMPLETED", "FAILED", "STOPPED"}
# The stages a whole job goes through, in order (one list, so a new stage is one edit).
JOB_STAGES = ["validate", "data", "prepare", "base", "distil", "train", "benchmark", "publish"]
# One optimizer step (the trainer keeps 15 s of any budget for its export) and a short benchmark.
QUICK_TRAINING = {"EAGLE_TRAIN_MAX_MINUTES": "0.05", "EAGLE_NUM_SPECULATIVE_TOKENS": "3"}
# A deadline for "eventually", not a speed target: on a slow 2-core AVX2 VM, beside the suite's
# other two processes, a retraining job on the built-in datasets was still running at 240 s.
JOB_TIMEOUT = 480.0
BUILTIN_DATASET = "tiny_chat"


@pytest.fixture(scope="module")
def module_worker(
    worker_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    # No EAGLE before and after the heads, as a job runs by default (the session's worker
    # measures it once): these jobs check the repeated run and the drift guard it feeds.
    overrides = {**worker_settings.benchmark_overrides, "repeat_baseline": True}
    settings = worker_settings.model_copy(update={"benchmark_overrides": overrides})
    process = launch_celery_worker(settings, tmp_path_factory.mktemp("e2e-worker") / "worker.log", "e2e")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def builtin_catalog(worker_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> str:
    """An operator's catalog with one small dataset, listed the way `eaglenest datasets add` does."""
    path = tmp_path_factory.mktemp("builtin") / f"{BUILTIN_DATASET}.jsonl"
    path.write_text(sharegpt_jsonl(16, start=100))
    add_dataset(
        S3Store(s3_client(worker_settings)), worker_settings, str(path), name=None, description="tiny"
    )
    return catalog_location(worker_settings).uri


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


@pytest.fixture
def inputs(
    s3_client: Any, s3_bucket: str, tiny_smollm2_target_dir: Path, tiny_head_dir: Path, tmp_path: Path
) -> Inputs:
    return Inputs(s3_client, s3_bucket, tiny_smollm2_target_dir, tiny_head_dir, tmp_path)


@pytest.fixture
def jobs(worker_jobs: WorkerJobs, module_worker: ManagedProcess) -> WorkerJobs:
    assert module_worker.is_running(), module_worker.log_tail()
    return worker_jobs


def _job(
    jobs: WorkerJobs,
    *,
    model_source: dict[str, Any],
    output_uri: str,
    data_source: dict[str, str] | None = None,
    environment: dict[str, str] | None = None,
    output_model: str | None = None,
    max_runtime: int = 900,
) -> str:
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


def _sagemaker_model(jobs: WorkerJobs, model_uri: str, channels: list[tuple[str, str]]) -> dict[str, Any]:
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


def _completed(jobs: WorkerJobs, name: str) -> dict[str, Any]:
    job = jobs.wait_for(name, FINISHED, timeout=JOB_TIMEOUT)
    assert job["OptimizationJobStatus"] == "COMPLETED", job.get("FailureReason")
    return job


def _failure(jobs: WorkerJobs, name: str) -> str:
    job = jobs.wait_for(name, FINISHED, timeout=JOB_TIMEOUT)
    assert job["OptimizationJobStatus"] == "FAILED"
    return str(job["FailureReason"])


def _stages(jobs: WorkerJobs, name: str) -> list[str]:
    with_stage = [message for _, message in jobs.events(name) if message.startswith("Stage '")]
    return [message.split("'")[1] for message in with_stage]


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

    name = _job(
        jobs,
        model_source={"S3": {"S3Uri": model_uri}},
        data_source={"S3Uri": inputs.uri("data/train/"), "S3DataType": "S3Prefix"},
        output_uri=output_uri,
        output_model=output_model,
    )
    job = _completed(jobs, name)

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
    assert _stages(jobs, name) == JOB_STAGES


def test_from_scratch_on_the_builtin_datasets(jobs: WorkerJobs, builtin_catalog: str, inputs: Inputs) -> None:
    output_uri = inputs.uri("out/builtin/")

    name = _job(jobs, model_source={"S3": {"S3Uri": inputs.model()}}, output_uri=output_uri)
    job = _completed(jobs, name)

    data = inputs.published(output_uri, job).lineage["training_data"]
    assert data["source"] == "BuiltIn"
    assert data["builtin_datasets"] == [BUILTIN_DATASET]
    assert data["listed_by"]["uri"] == builtin_catalog
    assert data["records"]["records_read"] == 16


def test_an_existing_head_retrained_on_the_builtin_datasets(
    jobs: WorkerJobs, builtin_catalog: str, inputs: Inputs
) -> None:
    head_uri = inputs.head()
    source = _sagemaker_model(jobs, inputs.model(), [("eagle_model", head_uri)])
    output_uri = inputs.uri("out/retrained/")

    name = _job(jobs, model_source=source, output_uri=output_uri)
    job = _completed(jobs, name)

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
    names = ("No EAGLE", "Base EAGLE", "Base EAGLE (K=3)", "Trained EAGLE", "Trained EAGLE (K=3)")
    names += ("No EAGLE (repeat)",)
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

    name = _job(
        jobs,
        model_source={"SageMakerModel": {"ModelName": model_name}},
        data_source={"S3Uri": manifest_uri, "S3DataType": "ManifestFile"},
        output_uri=output_uri,
    )
    job = _completed(jobs, name)

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
    assert _stages(jobs, name) == JOB_STAGES


def test_an_archive_member_outside_the_model_directory_fails_naming_it(
    jobs: WorkerJobs, inputs: Inputs
) -> None:
    archive = inputs.tmp / "escape.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(inputs.target_dir / "config.json", arcname="../config.json")
    inputs.s3.upload_file(str(archive), inputs.bucket, "packed/escape.tar.gz")
    model_uri = inputs.uri("packed/escape.tar.gz")
    name = _job(jobs, model_source={"S3": {"S3Uri": model_uri}}, output_uri=inputs.uri("out/"))
    assert _failure(jobs, name).startswith(
        f"Model archive {model_uri}: member '../config.json' has an absolute or '..' path"
    )


# ---------------------------------------------------------------------------- failures


def test_a_missing_tokenizer_file_fails_naming_it(jobs: WorkerJobs, inputs: Inputs) -> None:
    model_uri = inputs.model()
    inputs.s3.delete_object(Bucket=inputs.bucket, Key="models/tiny/tokenizer_config.json")
    name = _job(jobs, model_source={"S3": {"S3Uri": model_uri}}, output_uri=inputs.uri("out/"))
    assert _failure(jobs, name) == f"Tokenizer file not found: {model_uri}tokenizer_config.json"


def test_an_unsupported_architecture_fails_naming_the_config(jobs: WorkerJobs, inputs: Inputs) -> None:
    model_uri = inputs.model("models/bert")
    config = json.loads((inputs.target_dir / "config.json").read_text())
    inputs.text("models/bert/config.json", json.dumps({**config, "architectures": ["BertForMaskedLM"]}))
    name = _job(jobs, model_source={"S3": {"S3Uri": model_uri}}, output_uri=inputs.uri("out/"))
    reason = _failure(jobs, name)
    assert reason.startswith(f"{model_uri}config.json: architecture 'BertForMaskedLM' is not supported")
    assert (
        "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, GptOssForCausalLM"
        in reason
    )


def test_a_missing_weight_shard_fails_naming_it(jobs: WorkerJobs, inputs: Inputs) -> None:
    model_uri = inputs.model("models/sharded")
    inputs.s3.delete_object(Bucket=inputs.bucket, Key="models/sharded/model.safetensors")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    inputs.text("models/sharded/model.safetensors.index.json", json.dumps(index))
    inputs.text("models/sharded/model-00001-of-00002.safetensors", "shard one")
    name = _job(jobs, model_source={"S3": {"S3Uri": model_uri}}, output_uri=inputs.uri("out/"))
    assert _failure(jobs, name) == (
        f"Model weight shard not found: {model_uri}model-00002-of-00002.safetensors "
        f"(listed in {model_uri}model.safetensors.index.json)"
    )


def test_a_malformed_data_line_fails_naming_file_and_line(jobs: WorkerJobs, inputs: Inputs) -> None:
    lines = sharegpt_jsonl(9).splitlines()
    lines.insert(3, '{"conversations": [ this is not json')
    data_uri = inputs.text("data/bad.jsonl", "\n".join(lines) + "\n")
    name = _job(
        jobs,
        model_source={"S3": {"S3Uri": inputs.model()}},
        data_source={"S3Uri": inputs.uri("data/"), "S3DataType": "S3Prefix"},
        output_uri=inputs.uri("out/"),
    )
    reason = _failure(jobs, name)
    assert reason.startswith("Training data: 1 of 10 records skipped (10.0% > max_skip_fraction 1.0%)")
    assert f"first: {data_uri}:4: " in reason


def test_an_unknown_channel_fails_naming_it(jobs: WorkerJobs, inputs: Inputs) -> None:
    source = _sagemaker_model(jobs, inputs.model(), [("draft_model", inputs.head("heads/draft"))])
    name = _job(jobs, model_source=source, output_uri=inputs.uri("out/"))
    assert _failure(jobs, name) == (
        "PrimaryContainer.AdditionalModelDataSources.1: channel 'draft_model' is not supported; an "
        "optimization job reads only the 'eagle_model' channel (an existing EAGLE-3 head to start from)"
    )


def test_a_head_for_another_target_fails_naming_the_field(jobs: WorkerJobs, inputs: Inputs) -> None:
    head_uri = inputs.head("heads/other")
    config = json.loads((inputs.head_dir / "config.json").read_text())
    inputs.text("heads/other/config.json", json.dumps({**config, "vocab_size": 1000}))
    source = _sagemaker_model(jobs, inputs.model(), [("eagle_model", head_uri)])
    name = _job(jobs, model_source=source, output_uri=inputs.uri("out/"))
    reason = _failure(jobs, name)
    assert reason.startswith(f"The eagle_model channel is not a usable EAGLE-3 head: {head_uri}config.json")
    assert "'vocab_size' is 1000" in reason


def test_a_runtime_too_short_to_train_fails_before_training(jobs: WorkerJobs, inputs: Inputs) -> None:
    inputs.text("data/train.jsonl", sharegpt_jsonl(10))
    name = _job(
        jobs,
        model_source={"S3": {"S3Uri": inputs.model()}},
        data_source={"S3Uri": inputs.uri("data/"), "S3DataType": "S3Prefix"},
        output_uri=inputs.uri("out/"),
        environment={},
        max_runtime=60,
    )
    reason = _failure(jobs, name)
    assert reason.startswith("MaxRuntimeInSeconds leaves ")
    assert reason.endswith("raise StoppingCondition.MaxRuntimeInSeconds")
    assert jobs.row(name).stage == "train"
    bucket, key = split(inputs.uri("out/"))
    assert "Contents" not in inputs.s3.list_objects_v2(Bucket=bucket, Prefix=key + "lineage.json")
