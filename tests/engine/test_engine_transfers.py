"""A step's integer tables reach the device in one copy, each with its own values and length."""

from __future__ import annotations

import numpy as np
import torch

from engine.transfers import float_tables_to, int_tables_to


def test_every_table_comes_back_flattened_in_order() -> None:
    ids, positions, nothing, slots = int_tables_to(
        torch.device("cpu"), [[5, 6, 7], [8, 0, 0]], np.arange(6).reshape(2, 3) + 10, [], (3, 1)
    )

    assert ids.tolist() == [5, 6, 7, 8, 0, 0]
    assert positions.view(2, 3).tolist() == [[10, 11, 12], [13, 14, 15]]
    assert nothing.numel() == 0
    assert slots.tolist() == [3, 1]
    assert {t.dtype for t in (ids, positions, nothing, slots)} == {torch.long}


def test_no_tables_give_no_tensors() -> None:
    assert int_tables_to(torch.device("cpu")) == []


def test_float_tables_come_back_as_float32_in_order() -> None:
    temperatures, top_p = float_tables_to(torch.device("cpu"), [0.7, 0.0, 1.3], (0.9, 1.0, 0.95))

    assert temperatures.dtype == top_p.dtype == torch.float32
    torch.testing.assert_close(temperatures, torch.tensor([0.7, 0.0, 1.3]))
    torch.testing.assert_close(top_p, torch.tensor([0.9, 1.0, 0.95]))
