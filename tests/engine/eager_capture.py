"""An eager stand-in for a CUDA graph capture (``engine.cuda_graphs.Capture``), so the
bookkeeping around graphs -- buckets, static inputs, padding rows, recapture -- runs on a CPU:
``replay`` runs the captured function again and copies its result into the first output."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

import torch

_Output = TypeVar("_Output")


def eager_capture(function: Callable[[], _Output]) -> tuple[Callable[[], None], _Output]:
    output = function()

    def replay() -> None:
        for kept, fresh in zip(_tensors(output), _tensors(function()), strict=True):
            kept.copy_(fresh)

    return replay, output


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a tensor or a dataclass of them (``StepOutput``), None fields left out."""
    if isinstance(value, torch.Tensor):
        return [value]
    fields = [getattr(value, field.name) for field in dataclasses.fields(value)]
    return [field for field in fields if isinstance(field, torch.Tensor)]
