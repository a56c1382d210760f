"""Fixtures for the engine's tests (tiny targets: tests/fixtures/models.py and trainer.models.tiny)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread: None) -> None:
    """Every test here runs torch on one thread (tests/fixtures/torch_threads.py)."""
