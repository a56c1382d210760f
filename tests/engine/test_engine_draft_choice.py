"""Choosing a batch's drafts on the device: each sampled row draws from its own tempered top-p
distribution at uniforms from its own generator, greedy rows take the argmax."""

from __future__ import annotations

import pytest
import torch

from engine.drafting.draft_choice import DraftChoice, choose, draft_choice
from engine.sampling import SamplingParams, draw_at, probabilities, row_probabilities

VOCAB = 40
ROWS = [SamplingParams(1.0, 1.0), SamplingParams(0.7, 0.8), SamplingParams(), SamplingParams(1.3, 0.95)]


def _logits() -> torch.Tensor:
    return torch.randn(len(ROWS), VOCAB, generator=torch.Generator().manual_seed(3)) * 2


def _choice(generators: list[torch.Generator | None], num_tokens: list[int], steps: int) -> DraftChoice:
    choice = draft_choice(ROWS, generators, num_tokens, steps=steps, device=torch.device("cpu"))
    assert choice is not None
    return choice


def test_each_row_gets_the_distribution_probabilities_gives_it_alone() -> None:
    logits = _logits()
    temperature = torch.tensor([row.temperature for row in ROWS])
    top_p = torch.tensor([row.top_p for row in ROWS])

    together = row_probabilities(logits, temperature, top_p)

    for row, params in enumerate(ROWS):
        if not params.greedy:
            torch.testing.assert_close(together[row], probabilities(logits[row], params), rtol=0, atol=0)


def test_each_sampled_row_draws_from_its_distribution_and_greedy_rows_take_the_argmax() -> None:
    logits = _logits()
    generators: list[torch.Generator | None] = [
        torch.Generator().manual_seed(row) for row in range(len(ROWS))
    ]
    draws = 4000
    counts = torch.zeros(len(ROWS), VOCAB)
    for _ in range(draws):
        tokens, probs = choose(logits, _choice(generators, [1] * len(ROWS), 1), 0)
        counts[torch.arange(len(ROWS)), tokens] += 1
    assert probs is not None

    assert counts[2, int(logits[2].argmax())] == draws
    for row, params in enumerate(ROWS):
        if params.greedy:
            continue
        expected = probabilities(logits[row], params)
        assert counts[row][expected == 0].sum() == 0  # never a token the nucleus cut
        # Sampling noise at 4,000 draws over 40 tokens is ~0.05 in total variation.
        assert 0.5 * (counts[row] / draws - expected).abs().sum() < 0.08, f"row {row}"
        torch.testing.assert_close(probs[row], expected)


def test_a_row_draws_all_its_uniforms_from_its_own_generator_before_drafting() -> None:
    seeds = [11, 12, 13, 14]
    generators: list[torch.Generator | None] = [torch.Generator().manual_seed(seed) for seed in seeds]
    choice = _choice(generators, [2, 3, 3, 1], steps=3)

    for row, (params, count) in enumerate(zip(ROWS, [2, 3, 3, 1], strict=True)):
        fresh = torch.Generator().manual_seed(seeds[row])
        generator = generators[row]
        assert generator is not None
        if params.greedy:
            # A greedy row leaves its generator as it was.
            assert torch.equal(generator.get_state(), fresh.get_state())
            assert torch.equal(choice.uniforms[row], torch.zeros(3))
            continue
        expected = torch.empty(count).uniform_(generator=fresh)
        torch.testing.assert_close(choice.uniforms[row, :count], expected, rtol=0, atol=0)
        assert torch.equal(generator.get_state(), fresh.get_state())
        assert torch.equal(choice.uniforms[row, count:], torch.zeros(3 - count))


@pytest.mark.parametrize("uniform", [0.0, 1.0])
def test_a_draw_at_either_end_never_picks_a_token_the_nucleus_cut(uniform: float) -> None:
    # The nucleus leaves zeros before, between and after its tokens; u * total can round to the
    # total itself (1.0 stands for that), past every token.
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2, 0.0, 0.0]])
    drawn = int(draw_at(probs, torch.tensor([uniform]))[0])
    assert drawn == (1 if uniform == 0.0 else 4)


def test_a_draw_falls_where_its_uniform_falls_in_the_cumulative_mass() -> None:
    probs = torch.tensor([[0.1, 0.0, 0.4, 0.5]]).repeat(5, 1)
    drawn = draw_at(probs, torch.tensor([0.0, 0.09, 0.1, 0.49, 0.51]))
    assert drawn.tolist() == [0, 0, 2, 2, 3]


def test_sampled_drafting_without_a_generator_is_refused_before_any_row_draws() -> None:
    with pytest.raises(ValueError, match="needs a generator"):
        draft_choice(ROWS, [None] * len(ROWS), [1] * len(ROWS), steps=1, device=torch.device("cpu"))
    # The last sampled row lacks one: the rows before it have not drawn from theirs.
    generators: list[torch.Generator | None] = [
        torch.Generator().manual_seed(row) for row in range(len(ROWS))
    ]
    generators[-1] = None
    with pytest.raises(ValueError, match="needs a generator"):
        draft_choice(ROWS, generators, [1] * len(ROWS), steps=1, device=torch.device("cpu"))
    for row, generator in enumerate(generators[:-1]):
        assert generator is not None
        assert torch.equal(generator.get_state(), torch.Generator().manual_seed(row).get_state())


def test_an_all_greedy_batch_builds_no_choice() -> None:
    greedy = [SamplingParams()] * 3
    assert draft_choice(greedy, [None] * 3, [2] * 3, steps=2, device=torch.device("cpu")) is None
