"""Temperature and top-p: the distribution tokens are drawn from."""

from __future__ import annotations

import pytest
import torch

from engine import sampling
from engine.sampling import SamplingParams, probabilities, sample_tokens


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


def _sorted_nucleus(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """The definition, by a full sort of every row: what the CPU's candidate tiers must equal."""
    probs = torch.softmax(logits.float(), dim=-1)
    ordered, order = probs.sort(dim=-1, descending=True)
    ordered = ordered.masked_fill(ordered.cumsum(dim=-1) - ordered >= top_p, 0.0)
    kept = torch.zeros_like(probs).scatter_(-1, order, ordered)
    return kept / kept.sum(dim=-1, keepdim=True)


def _rows_of_every_width(vocab: int) -> torch.Tensor:
    """Rows whose 0.9-nucleus is a few tokens, a few dozen, and nearly the whole vocabulary,
    interleaved, so that neighbouring rows are settled by different candidate tiers."""
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(12, vocab, generator=generator)
    scales = torch.tensor([8.0, 0.05, 2.0] * 4).unsqueeze(-1)
    return noise * scales


@pytest.mark.parametrize("tiers", [(4, 16), (256, 4096)])
def test_candidate_tiers_find_the_nucleus_a_full_sort_finds(
    monkeypatch: pytest.MonkeyPatch, tiers: tuple[int, ...]
) -> None:
    monkeypatch.setattr(sampling, "CPU_CANDIDATE_TIERS", tiers)
    logits = _rows_of_every_width(64 if tiers == (4, 16) else 6000)
    params = SamplingParams(temperature=1.0, top_p=0.9)
    expected = _sorted_nucleus(logits, 0.9)
    nucleus_sizes = expected.gt(0).sum(dim=-1)
    # The rows really are spread over the tiers: within the first, within the second, beyond both.
    assert nucleus_sizes.le(tiers[0]).any()
    assert (nucleus_sizes.gt(tiers[0]) & nucleus_sizes.le(tiers[1])).any()
    assert nucleus_sizes.gt(tiers[1]).any()
    assert torch.equal(probabilities(logits, params), expected)
    assert torch.equal(probabilities(logits[1], params), expected[1])  # one row, unbatched


def test_candidate_tiers_draw_each_row_from_its_own_nucleus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "CPU_CANDIDATE_TIERS", (4, 16))
    # Row r puts its mass on tokens 10r..10r+9 (tier 2 or the sort) or on token 10r alone (tier 1).
    vocab, rows = 64, 6
    logits = torch.full((rows, vocab), -30.0)
    for row in range(rows):
        width = 1 if row % 2 else 10
        logits[row, 10 * row : 10 * row + width] = 0.0
    torch.manual_seed(0)
    drawn = torch.stack(
        [sample_tokens(logits, SamplingParams(temperature=1.0, top_p=0.95)) for _ in range(300)]
    )
    for row in range(rows):
        expected = {10 * row} if row % 2 else set(range(10 * row, 10 * row + 10))
        assert set(drawn[:, row].tolist()) == expected


def test_candidate_draws_follow_the_nucleus_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "CPU_CANDIDATE_TIERS", (4, 16))
    logits = _rows_of_every_width(64)[:3]
    expected = _sorted_nucleus(logits, 0.9)
    torch.manual_seed(0)
    draws = 20_000
    drawn = sample_tokens(logits.repeat(draws, 1), SamplingParams(temperature=1.0, top_p=0.9)).view(draws, 3)
    for row in range(3):
        frequencies = torch.bincount(drawn[:, row], minlength=64).float() / draws
        assert not frequencies[expected[row] == 0].any()
        # Three standard deviations of a frequency over 20,000 draws is at most ~0.011.
        assert (frequencies - expected[row]).abs().max() < 0.011
