"""How many rows distillation runs at once on each device."""

from __future__ import annotations

from pathlib import Path

import torch

from trainer.config import CUDA_GENERATION_ROWS, TrainConfig


def config(**overrides: object) -> TrainConfig:
    return TrainConfig(model_dir=Path("m"), data_paths=[Path("d")], out_dir=Path("o"), **overrides)  # type: ignore[arg-type]


def test_a_gpu_runs_many_rows_unless_the_config_names_its_own() -> None:
    default = config()
    assert default.generation_rows(torch.device("cpu")) == default.regenerate_batch_size == 48
    assert default.generation_rows(torch.device("cuda")) == CUDA_GENERATION_ROWS
    assert config(regenerate_batch_size=32).generation_rows(torch.device("cuda")) == 32
