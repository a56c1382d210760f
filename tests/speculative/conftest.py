"""Fixtures for the engine tests (the doubles themselves live in engine_doubles.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    # Tiny models gain nothing from a second thread; the other core stays free for others.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
