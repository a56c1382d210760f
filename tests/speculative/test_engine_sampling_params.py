"""Temperature and top-p: the distribution tokens are drawn from."""

from __future__ import annotations

import pytest
import torch

from engine.sampling import SamplingParams, probabilities


def test_top_p_keeps_the_smallest_nucleus_reaching_p() -> None:
    logits = torch.log(torch.tensor([0.05, 0.5, 0.3, 0.15]))
    # 0.5 + 0.3 = 0.8 reaches 0.8: the nucleus is {1, 2}, renormalised.
    nucleus = probabilities(logits, SamplingParams(temperature=1.0, top_p=0.8))
    torch.testing.assert_close(nucleus, torch.tensor([0.0, 0.5 / 0.8, 0.3 / 0.8, 0.0]))
    # Just above 0.8 the next most likely token joins.
    wider = probabilities(logits, SamplingParams(temperature=1.0, top_p=0.81))
    torch.testing.assert_close(wider, torch.tensor([0.0, 0.5, 0.3, 0.15]) / 0.95)
    # A tiny p still keeps the most likely token.
    top = probabilities(logits, SamplingParams(temperature=1.0, top_p=0.01))
    torch.testing.assert_close(top, torch.tensor([0.0, 1.0, 0.0, 0.0]))


def test_temperature_sharpens_and_works_per_row() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    cold = probabilities(logits, SamplingParams(temperature=0.5))
    torch.testing.assert_close(cold, torch.softmax(logits * 2, dim=-1))
    assert cold.dtype == torch.float32
    assert probabilities(logits.bfloat16(), SamplingParams(temperature=1.0)).dtype == torch.float32


@pytest.mark.parametrize(
    ("temperature", "top_p", "message"),
    [(-0.1, 1.0, "temperature must be >= 0"), (1.0, 0.0, r"top_p must be in \(0, 1\]"), (1.0, 1.5, "top_p")],
)
def test_bad_parameters_are_named(temperature: float, top_p: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplingParams(temperature=temperature, top_p=top_p)


def test_greedy_has_no_distribution() -> None:
    assert SamplingParams().greedy
    with pytest.raises(ValueError, match="greedy decoding"):
        probabilities(torch.zeros(3), SamplingParams())
