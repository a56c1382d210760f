"""The trainer config a fanned-out distillation's plan hands its shards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainer.config import CUDA_GENERATION_ROWS, TrainConfig
from worker.fanout.layout import DistillationPlanDocument, plan_train_config, shard_train_config

PER_WORKER = {"model_dir", "out_dir", "distilled_paths", "init_head_dir", "device"}


def _through_a_plan(config: TrainConfig, tmp_path: Path, *, shard_device: str = "cpu") -> TrainConfig:
    """``config`` as a shard's worker set to ``shard_device`` gets it: written into the plan,
    read back from S3's JSON."""
    plan = DistillationPlanDocument(
        train_config=plan_train_config(config),
        model_uri="s3://models/smollm2/",
        model_objects=[],
        model_compressed=False,
        origins={},
        shards=[],
        deadline_epoch=None,
    )
    stored = DistillationPlanDocument.model_validate_json(plan.model_dump_json())
    return shard_train_config(stored, tmp_path / "model", tmp_path / "scratch", device=shard_device)


def _job_config(tmp_path: Path, **chosen: Any) -> TrainConfig:
    data = tmp_path / "chats.jsonl"
    return TrainConfig(
        model_dir=tmp_path / "job-model",
        out_dir=tmp_path / "job-run",
        data_paths=[data],
        self_instruct_conversations=40,
        regenerate_max_new_tokens=96,
        seed=5,
        **chosen,
    )


def test_a_shard_on_a_gpu_runs_the_gpu_rows_and_every_field_the_job_set(tmp_path: Path) -> None:
    """Written out whole, the config named every default as chosen, so a GPU shard ran 48 rows."""
    job = _job_config(tmp_path)
    shard = _through_a_plan(job, tmp_path)

    assert shard.generation_rows(torch.device("cuda")) == CUDA_GENERATION_ROWS
    assert shard.generation_rows(torch.device("cpu")) == job.regenerate_batch_size
    assert shard.model_dump(exclude=PER_WORKER) == job.model_dump(exclude=PER_WORKER)
    assert (shard.model_dir, shard.out_dir) == (tmp_path / "model", tmp_path / "scratch")


def test_rows_the_job_chose_hold_on_every_shard(tmp_path: Path) -> None:
    shard = _through_a_plan(_job_config(tmp_path, regenerate_batch_size=16), tmp_path)

    assert shard.generation_rows(torch.device("cuda")) == 16
    assert shard.generation_rows(torch.device("cpu")) == 16


def test_a_shard_runs_on_its_own_workers_device_not_the_coordinators(tmp_path: Path) -> None:
    """A queue may mix CPU and GPU workers: the plan carries the coordinator's device, and a
    CPU worker failed every shard of a GPU job's plan while a GPU worker distilled on its CPU."""
    gpu_job = _job_config(tmp_path, device="cuda")
    cpu_job = _job_config(tmp_path, device="cpu")

    assert _through_a_plan(gpu_job, tmp_path, shard_device="cpu").device == "cpu"
    assert _through_a_plan(cpu_job, tmp_path, shard_device="cuda").device == "cuda"
    assert _through_a_plan(cpu_job, tmp_path, shard_device="auto").device == "auto"
