"""The device a worker reports for the pieces of jobs it runs: the one it runs them on."""

from __future__ import annotations

import pytest
import torch

from trainer.device import device_type
from worker.worker_identity import current_worker


@pytest.mark.parametrize("gpu_seen", [True, False])
def test_a_cpu_worker_reports_the_cpu_even_where_torch_sees_a_gpu(
    monkeypatch: pytest.MonkeyPatch, gpu_seen: bool
) -> None:
    """It reported ``cuda`` whenever torch saw a GPU, though EAGLENEST_DEVICE=cpu ran it all on the CPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu_seen)

    assert current_worker("cpu").device == "cpu"
    assert device_type("cuda") == "cuda"
    assert device_type("auto") == ("cuda" if gpu_seen else "cpu")
