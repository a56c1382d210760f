"""A whole job per supported architecture, and per draft variant (EAGLE-2, P-EAGLE).

Each job trains a head for a tiny random target of one architecture (byte-level ChatML
tokenizer, ``trainer.models.tiny``) for a few seconds and benchmarks it through the
serving engine, the stage where a GPT-OSS job (sliding-window layers, attention sinks)
used to fail. The module's worker benchmarks one concurrency level with two requests: the
layout of the published benchmark is checked in detail by ``test_jobs_e2e``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from safetensors.torch import load_file
from transformers import AutoConfig

from db.settings import Settings
from stack.processes import ManagedProcess
from tests.fixtures.worker import module_worker
from tests.worker.optimization_jobs import FINISHED, JOB_STAGES
from tests.worker.published_outputs import Published, read_published
from tests.worker.tiny_inputs import put_text, sharegpt_jsonl, upload_directory
from tests.worker.worker_jobs import WorkerJobs

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

JOB_TIMEOUT = 300.0
REQUESTS = 2
# Seconds of training, and a fixed-K row beside the adaptive one. On these tiny targets a head
# forward costs about what a target step does, so adaptive K rightly decodes plainly and its row
# may measure no acceptance; the fixed-K row always drafts, so acceptance is asserted there.
FIXED_K = 2
QUICK_TRAINING = {"EAGLE_TRAIN_MAX_MINUTES": "0.05", "EAGLE_NUM_SPECULATIVE_TOKENS": str(FIXED_K)}
FIXED_ROW = f"Trained EAGLE (K={FIXED_K})"


@pytest.fixture(scope="module")
def architecture_worker(
    worker_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    """The session's worker settings (same queue, No EAGLE measured once), benchmarking one
    concurrency level only: these jobs check that each architecture completes, not the
    benchmark's levels (test_jobs_e2e checks them and the repeated No EAGLE run)."""
    overrides = {**worker_settings.benchmark_overrides, "concurrency": [1], "requests_per_level": REQUESTS}
    settings = worker_settings.model_copy(update={"benchmark_overrides": overrides})
    with module_worker(settings, tmp_path_factory, "architectures") as process:
        yield process


@pytest.fixture
def jobs(worker_jobs: WorkerJobs, architecture_worker: ManagedProcess) -> WorkerJobs:
    assert architecture_worker.is_running(), architecture_worker.log_tail()
    return worker_jobs


def _completed_job(
    jobs: WorkerJobs,
    s3_client: Any,
    s3_bucket: str,
    target_dir: Path,
    tmp_path: Path,
    *,
    label: str,
    environment: dict[str, str],
    draft_variant: str,
    draft_vocab: bool | None = None,
) -> tuple[str, Published]:
    """A quick job on ``target_dir`` with its own data, which must complete; its name and outputs."""
    model_uri = upload_directory(s3_client, target_dir, s3_bucket, f"models/tiny-{label}")
    put_text(s3_client, s3_bucket, f"data/{label}/part-0.jsonl", sharegpt_jsonl(12))
    output_uri = f"s3://{s3_bucket}/out/{label}/"
    name = jobs.create_request(
        ModelSource={"S3": {"S3Uri": model_uri}},
        OptimizationEnvironment={**QUICK_TRAINING, **environment},
        OptimizationConfigs=[
            {
                "ModelSpeculativeDecodingConfig": {
                    "Technique": "EAGLE",
                    "TrainingDataSource": {
                        "S3Uri": f"s3://{s3_bucket}/data/{label}/",
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
        target_dir=target_dir,
        tmp=tmp_path,
        draft_variant=draft_variant,
        draft_vocab=draft_vocab,
    )
    return name, published


def test_a_whole_job_completes_for_every_architecture(
    jobs: WorkerJobs, s3_client: Any, s3_bucket: str, tiny_target_per_architecture_dir: Path, tmp_path: Path
) -> None:
    target_dir = tiny_target_per_architecture_dir
    architecture = AutoConfig.from_pretrained(target_dir).architectures[0]
    # Qwen3-Next trains an EAGLE-2 head by default (over the full vocabulary: no
    # draft_vocab.json), served one forward per sequence.
    variant = "eagle2" if architecture == "Qwen3NextForCausalLM" else "eagle3"
    name, published = _completed_job(
        jobs,
        s3_client,
        s3_bucket,
        target_dir,
        tmp_path,
        label=architecture,
        environment={},
        draft_variant=variant,
        draft_vocab=False,
    )

    stages = [message.split("'")[1] for _, message in jobs.events(name) if message.startswith("Stage '")]
    assert stages == JOB_STAGES
    assert published.lineage["source_model"]["architecture"] == architecture
    assert published.lineage["training"]["steps"] >= 1
    rows = {(row["configuration"], row["concurrency"]): row for row in published.results["rows"]}
    assert set(rows) == {("No EAGLE", 1), ("Trained EAGLE", 1), (FIXED_ROW, 1)}
    for row in rows.values():
        # guidellm may leave a level's last in-flight request incomplete when it ends the level.
        assert 1 <= row["successful_requests"] <= REQUESTS
        assert row["output_throughput"] > 0
    assert rows["Trained EAGLE", 1]["adaptive"] is True
    assert 1.0 <= rows[FIXED_ROW, 1]["mean_acceptance_length"] <= FIXED_K + 1


def _variant_job(
    jobs: WorkerJobs,
    s3_client: Any,
    s3_bucket: str,
    target_dir: Path,
    tmp_path: Path,
    *,
    variant: str,
    environment: dict[str, str],
) -> Published:
    """A job with ``EAGLE_VARIANT=variant``, which must complete and benchmark its head; its outputs."""
    _, published = _completed_job(
        jobs,
        s3_client,
        s3_bucket,
        target_dir,
        tmp_path,
        label=variant,
        environment={"EAGLE_VARIANT": variant, **environment},
        draft_variant=variant,
    )
    assert published.lineage["hyperparameters"]["variant"] == variant
    trained = [row for row in published.results["rows"] if row["configuration"].startswith("Trained EAGLE")]
    assert trained
    assert all(row["output_throughput"] > 0 for row in trained)
    # The fixed-K rows always draft (see QUICK_TRAINING); adaptive K may judge drafting a loss.
    fixed = [row for row in trained if not row["adaptive"]]
    assert fixed
    assert all(row["mean_acceptance_length"] >= 1.0 for row in fixed)
    return published


def test_an_eagle2_job_trains_benchmarks_and_publishes_a_vllm_eagle_head(
    jobs: WorkerJobs, s3_client: Any, s3_bucket: str, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    """EAGLE_VARIANT=eagle2 on a Llama target (the default there is eagle3), end to end."""
    # 256 of the tiny vocabulary's 259 tokens: the draft vocabulary file is published too.
    published = _variant_job(
        jobs,
        s3_client,
        s3_bucket,
        tiny_llama_dir,
        tmp_path,
        variant="eagle2",
        environment={"EAGLE_DRAFT_VOCAB_SIZE": "256"},
    )
    config = json.loads((tmp_path / "eagle_model/config.json").read_text())
    assert config["architectures"] == ["EagleLlamaForCausalLM"]
    assert published.lineage["training"]["aux_layer_ids"] == [8]  # the final norm's output
    assert len(json.loads((tmp_path / "eagle_model/draft_vocab.json").read_text())["target_ids"]) == 256


def test_a_peagle_job_publishes_and_benchmarks_a_peagle_head(
    jobs: WorkerJobs, s3_client: Any, s3_bucket: str, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    _variant_job(
        jobs,
        s3_client,
        s3_bucket,
        tiny_llama_dir,
        tmp_path,
        variant="peagle",
        environment={"EAGLE_NUM_SPECULATIVE_TOKENS": "3"},
    )
    config = json.loads((tmp_path / "eagle_model/config.json").read_text())
    assert config["architectures"] == ["PeagleLlamaForCausalLM"]
    assert config["speculators_model_type"] == "peagle"
    assert "mask_hidden" in load_file(str(tmp_path / "eagle_model/model.safetensors"))
