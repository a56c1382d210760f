"""Fixtures for the endpoint instance tests: a worker that believes it has two GPUs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from worker.endpoints import gpu_placement
from worker.endpoints.gpu_placement import GpuPlacement


@pytest.fixture
def two_gpu_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[GpuPlacement]:
    """The worker's placement built as a real one is, from CUDA_VISIBLE_DEVICES=0,1 (no GPU needed:
    only the children's environment is checked), fresh for this test and forgotten after it."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    gpu_placement._worker_placement.cache_clear()
    yield gpu_placement.worker_placement()
    gpu_placement._worker_placement.cache_clear()
