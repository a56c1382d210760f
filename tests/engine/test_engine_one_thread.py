"""The tests of tiny models run torch on one thread (tests/fixtures/torch_threads.py)."""

from __future__ import annotations

import torch


def test_tests_here_run_torch_on_one_thread() -> None:
    assert torch.get_num_threads() == 1
