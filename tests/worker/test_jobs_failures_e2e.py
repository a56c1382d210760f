"""Optimization jobs that must fail, end to end: each names what was wrong in its FailureReason,
in the job's own terms (a URI, a file and line, a config field), and publishes nothing.

One worker serves the whole module; each job fails in its first stages, so the module is short.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator

import pytest

from db.settings import Settings
from stack.processes import ManagedProcess
from tests.fixtures.worker import module_worker
from tests.worker.optimization_jobs import Inputs, create_job, failure_reason, sagemaker_model_source
from tests.worker.published_outputs import split
from tests.worker.tiny_inputs import sharegpt_jsonl
from tests.worker.worker_jobs import WorkerJobs

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def failures_worker(
    worker_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    with module_worker(worker_settings, tmp_path_factory, "failures") as process:
        yield process


@pytest.fixture
def jobs(worker_jobs: WorkerJobs, failures_worker: ManagedProcess) -> WorkerJobs:
    assert failures_worker.is_running(), failures_worker.log_tail()
    return worker_jobs


def test_an_archive_member_outside_the_model_directory_fails_naming_it(
    jobs: WorkerJobs, inputs: Inputs
) -> None:
    archive = inputs.tmp / "escape.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(inputs.target_dir / "config.json", arcname="../config.json")
    inputs.s3.upload_file(str(archive), inputs.bucket, "packed/escape.tar.gz")
    model_uri = inputs.uri("packed/escape.tar.gz")
    name = create_job(jobs, model_source={"S3": {"S3Uri": model_uri}}, output_uri=inputs.uri("out/"))
    assert failure_reason(jobs, name).startswith(
        f"Model archive {model_uri}: member '../config.json' has an absolute or '..' path"
    )


def test_a_missing_tokenizer_file_fails_naming_it(jobs: WorkerJobs, inputs: Inputs) -> None:
    model_uri = inputs.model()
    inputs.s3.delete_object(Bucket=inputs.bucket, Key="models/tiny/tokenizer_config.json")
    name = create_job(jobs, model_source={"S3": {"S3Uri": model_uri}}, output_uri=inputs.uri("out/"))
    assert failure_reason(jobs, name) == f"Tokenizer file not found: {model_uri}tokenizer_config.json"


def test_an_unsupported_architecture_fails_naming_the_config(jobs: WorkerJobs, inputs: Inputs) -> None:
    model_uri = inputs.model("models/bert")
    config = json.loads((inputs.target_dir / "config.json").read_text())
    inputs.text("models/bert/config.json", json.dumps({**config, "architectures": ["BertForMaskedLM"]}))
    name = create_job(jobs, model_source={"S3": {"S3Uri": model_uri}}, output_uri=inputs.uri("out/"))
    reason = failure_reason(jobs, name)
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
    name = create_job(jobs, model_source={"S3": {"S3Uri": model_uri}}, output_uri=inputs.uri("out/"))
    assert failure_reason(jobs, name) == (
        f"Model weight shard not found: {model_uri}model-00002-of-00002.safetensors "
        f"(listed in {model_uri}model.safetensors.index.json)"
    )


def test_a_malformed_data_line_fails_naming_file_and_line(jobs: WorkerJobs, inputs: Inputs) -> None:
    lines = sharegpt_jsonl(9).splitlines()
    lines.insert(3, '{"conversations": [ this is not json')
    data_uri = inputs.text("data/bad.jsonl", "\n".join(lines) + "\n")
    name = create_job(
        jobs,
        model_source={"S3": {"S3Uri": inputs.model()}},
        data_source={"S3Uri": inputs.uri("data/"), "S3DataType": "S3Prefix"},
        output_uri=inputs.uri("out/"),
    )
    reason = failure_reason(jobs, name)
    assert reason.startswith("Training data: 1 of 10 records skipped (10.0% > max_skip_fraction 1.0%)")
    assert f"first: {data_uri}:4: " in reason


def test_an_unknown_channel_fails_naming_it(jobs: WorkerJobs, inputs: Inputs) -> None:
    source = sagemaker_model_source(jobs, inputs.model(), [("draft_model", inputs.head("heads/draft"))])
    name = create_job(jobs, model_source=source, output_uri=inputs.uri("out/"))
    assert failure_reason(jobs, name) == (
        "PrimaryContainer.AdditionalModelDataSources.1: channel 'draft_model' is not supported; an "
        "optimization job reads only the 'eagle_model' channel (an existing EAGLE-3 head to start from)"
    )


def test_a_head_for_another_target_fails_naming_the_field(jobs: WorkerJobs, inputs: Inputs) -> None:
    head_uri = inputs.head("heads/other")
    config = json.loads((inputs.head_dir / "config.json").read_text())
    inputs.text("heads/other/config.json", json.dumps({**config, "vocab_size": 1000}))
    source = sagemaker_model_source(jobs, inputs.model(), [("eagle_model", head_uri)])
    name = create_job(jobs, model_source=source, output_uri=inputs.uri("out/"))
    reason = failure_reason(jobs, name)
    assert reason.startswith(f"The eagle_model channel is not a usable EAGLE-3 head: {head_uri}config.json")
    assert "'vocab_size' is 1000" in reason


def test_a_runtime_too_short_to_train_fails_before_training(jobs: WorkerJobs, inputs: Inputs) -> None:
    inputs.text("data/train.jsonl", sharegpt_jsonl(10))
    name = create_job(
        jobs,
        model_source={"S3": {"S3Uri": inputs.model()}},
        data_source={"S3Uri": inputs.uri("data/"), "S3DataType": "S3Prefix"},
        output_uri=inputs.uri("out/"),
        environment={},
        max_runtime=60,
    )
    reason = failure_reason(jobs, name)
    assert reason.startswith("MaxRuntimeInSeconds leaves ")
    assert reason.endswith("raise StoppingCondition.MaxRuntimeInSeconds")
    assert jobs.row(name).stage == "train"
    bucket, key = split(inputs.uri("out/"))
    assert "Contents" not in inputs.s3.list_objects_v2(Bucket=bucket, Prefix=key + "lineage.json")
