"""Fixtures for the serving tests; target and head doubles come from tests/speculative/engine_doubles.py."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread: None) -> None:
    """Every test here runs torch on one thread (tests/fixtures/torch_threads.py)."""
