"""Fixtures for the serving tests; target and head doubles come from the engine tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# The engine tests' doubles (tiny targets, random and oracle heads, HF greedy reference).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    # Tiny models gain nothing from a second thread; the other core stays free for others.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
