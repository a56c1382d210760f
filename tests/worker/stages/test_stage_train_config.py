"""The job's training config, as stages 'distil' and 'train' build it from the worker's settings."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
import torch

import worker.stages.train as train_stage
from core.eagle_knobs import EagleKnobs
from core.job_errors import JobFailedError
from worker.artifacts import TrainingDataInput
from worker.context import JobContext
from worker.s3_snapshot import S3Snapshot


def _context(tmp_path: Path, *, device: str, nproc: int) -> JobContext:
    data = TrainingDataInput(
        kind="S3Prefix",
        uri="s3://data/",
        snapshot=S3Snapshot(source="s3://data/", entries=()),
        local_dir=tmp_path,
        files=[tmp_path / "chat.jsonl"],
    )
    context = SimpleNamespace(
        artifacts=SimpleNamespace(model=SimpleNamespace(local_dir=tmp_path), data=data, base_head=None),
        knobs=EagleKnobs.from_environment({}),
        settings=SimpleNamespace(train_overrides={}, train_nproc=nproc, device=device),
    )
    return cast(JobContext, context)


def test_a_worker_with_fewer_gpus_than_ranks_fails_the_job_before_it_distils(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EAGLENEST_TRAIN_NPROC=2 on a one-GPU worker: the config both stages build refuses it, so
    stage 'distil' does not fan the replies out over the queue (nor 'train' distil them) before
    the data-parallel group finds it cannot start. One visible GPU is simulated."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(train_stage, "resolve_device", lambda _name: torch.device("cuda", 0))
    with pytest.raises(JobFailedError, match=r"nproc 2 on CUDA needs one GPU per process; 1 visible$"):
        train_stage.job_train_config(_context(tmp_path, device="cuda", nproc=2), tmp_path / "run", None)
    config = train_stage.job_train_config(_context(tmp_path, device="cuda", nproc=1), tmp_path / "run", None)
    assert (config.device, config.nproc) == ("cuda", 1)
