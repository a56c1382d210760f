"""The target's distributions of a sampled batch, every row with its own settings, at once."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from engine import sampling
from engine.dispatched_ops import DispatchedOps
from engine.sampling import SamplingParams, probabilities, rows_probabilities

SETTINGS = [
    SamplingParams(0.7, 0.9),
    SamplingParams(1.0),
    SamplingParams(1.3, 0.5),
    SamplingParams(0.5, 0.95),
]


def _rows(count: int, vocab: int = 300) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(count)
    return [torch.randn(1 + row % 4, vocab, generator=generator) * 3 for row in range(count)]


@pytest.mark.parametrize("packed", [True, False])
def test_each_row_gets_what_probabilities_gives_it_alone(
    packed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sampling, "PACK_ROWS_ON_CPU", packed)
    rows = _rows(8)
    params = [SETTINGS[row % len(SETTINGS)] for row in range(8)]

    together = rows_probabilities(rows, params)

    assert [probs.shape for probs in together] == [logits.shape for logits in rows]
    for logits, setting, probs in zip(rows, params, together, strict=True):
        torch.testing.assert_close(probs, probabilities(logits, setting))


def test_eight_rows_dispatch_the_operators_two_rows_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Python per row (beyond views, which launch nothing): on a GPU a sampled
    batch's target distributions are the same kernels whatever its size. (A CPU searches a
    nucleus tier by tier; here it sorts whole rows, as a GPU does, so the count is fixed.)"""
    monkeypatch.setattr(sampling, "CPU_CANDIDATE_TIERS", ())
    monkeypatch.setattr(sampling, "PACK_ROWS_ON_CPU", True)  # as a GPU computes them
    dispatched = {}
    for count in (2, 8):
        rows = _rows(count)
        params = [SETTINGS[row % len(SETTINGS)] for row in range(count)]
        with DispatchedOps() as ops:
            rows_probabilities(rows, params)
        dispatched[count] = Counter(
            name for name in ops.names if name not in {"aten.split_with_sizes", "aten.view"}
        )

    assert dispatched[8] == dispatched[2]


def test_a_greedy_row_or_a_missing_setting_is_refused() -> None:
    rows = _rows(2)
    with pytest.raises(ValueError, match="greedy decoding"):
        rows_probabilities(rows, [SamplingParams(0.7), SamplingParams()])
    with pytest.raises(ValueError, match="2 rows of logits but 1 sampling settings"):
        rows_probabilities(rows, [SamplingParams(0.7)])
    assert rows_probabilities([], []) == []
