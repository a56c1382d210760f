"""Speculative sampling emits tokens distributed exactly as the target's distribution.

Each check draws many samples with fixed seeds and compares the empirical distribution
with the exact one by a chi-square test; a deliberately wrong rule on the same data must
fail it, so the tests have the power to catch a real bug.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from engine.sampling import probabilities, sample
from speculative import SamplingParams, SpeculativeDecoder
from speculative.verification import Verdict, verify_sampled
from tests.speculative.engine_doubles import random_head, tiny_target

VOCAB = 12
K = 3
MIN_P_VALUE = 1e-3  # fixed seeds make every check deterministic; this only sets the strictness


def chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """P-value of observed ``counts`` under ``probs``; bins expecting < 5 are pooled."""
    total = counts.sum()
    assert int(counts[probs == 0].sum()) == 0, "a token of probability 0 was emitted"
    expected = probs.double() * total
    big = expected >= 5
    observed = torch.cat([counts[big].double(), counts[~big].double().sum().view(1)])
    expected = torch.cat([expected[big], expected[~big].sum().view(1)])
    keep = expected > 0
    observed, expected = observed[keep], expected[keep]
    if len(expected) < 2:  # one possible outcome, and nothing else was emitted
        return 1.0
    statistic = ((observed - expected) ** 2 / expected).sum()
    dof = torch.tensor(float(len(expected) - 1), dtype=torch.float64)
    return float(torch.special.gammaincc(dof / 2, statistic / 2))


def distributions(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Target p [K+1, V] and a rather different draft q [K, V] that is 0 outside a draft vocabulary."""
    generator = torch.Generator().manual_seed(seed)
    p = torch.softmax(1.5 * torch.randn(K + 1, VOCAB, generator=generator, dtype=torch.float64), -1).float()
    q = torch.softmax(1.5 * torch.randn(K, VOCAB, generator=generator, dtype=torch.float64), -1).float()
    q[:, [1, 4, 7]] = 0.0  # outside the draft vocabulary
    return p, q / q.sum(-1, keepdim=True)


Verifier = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Generator], Verdict]


def emitted_counts(
    p: torch.Tensor, q: torch.Tensor, verifier: Verifier, trials: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Counts of the token emitted at each position [K+1, V], and of accepted drafts per position [K]."""
    generator = torch.Generator().manual_seed(1234)
    counts = torch.zeros(K + 1, VOCAB, dtype=torch.long)
    accepted_at = torch.zeros(K, dtype=torch.long)
    for _ in range(trials):
        drafts = sample(q, generator)
        verdict = verifier(drafts, q, p, generator)
        emitted = [*drafts[: verdict.accepted].tolist(), verdict.next_token]
        for position, token in enumerate(emitted):
            counts[position, token] += 1
        accepted_at[: verdict.accepted] += 1
    return counts, accepted_at


def accept_everything(
    draft_ids: torch.Tensor, q: torch.Tensor, p: torch.Tensor, g: torch.Generator
) -> Verdict:
    """A wrong rule: always keeps the drafts, so the output follows q instead of p."""
    return Verdict(accepted=len(draft_ids), next_token=int(sample(p[len(draft_ids)], g)))


def residual_from_p(draft_ids: torch.Tensor, q: torch.Tensor, p: torch.Tensor, g: torch.Generator) -> Verdict:
    """A subtler wrong rule: right acceptance test, but resamples from p instead of norm(max(p - q, 0))."""
    verdict = verify_sampled(draft_ids, q, p, g)
    if verdict.accepted == len(draft_ids):
        return verdict
    return Verdict(accepted=verdict.accepted, next_token=int(sample(p[verdict.accepted], g)))


@pytest.mark.parametrize("seed", [0, 1])
def test_every_emitted_position_follows_the_target(seed: int) -> None:
    p, q = distributions(seed)
    counts, accepted_at = emitted_counts(p, q, verify_sampled, trials=12_000)

    # Position j is reached when drafts 0..j-1 were accepted; its token must follow p[j].
    for position in range(K + 1):
        assert chi_square_p_value(counts[position], p[position]) > MIN_P_VALUE, f"position {position}"
    # Draft 0 is accepted with probability sum_x min(p(x), q(x)).
    rate = float(torch.minimum(p[0], q[0]).sum())
    trials = 12_000
    assert abs(int(accepted_at[0]) / trials - rate) < 4 * (rate * (1 - rate) / trials) ** 0.5


@pytest.mark.parametrize("wrong_rule", [accept_everything, residual_from_p])
def test_the_check_catches_wrong_rules(wrong_rule: Verifier) -> None:
    p, q = distributions(0)
    counts, _ = emitted_counts(p, q, wrong_rule, trials=6_000)
    p_values = [chi_square_p_value(counts[j], p[j]) for j in range(K)]
    assert min(p_values) < 1e-6, p_values


def test_identical_distributions_accept_every_draft() -> None:
    p, _ = distributions(3)
    counts, accepted_at = emitted_counts(p, p[:K].clone(), verify_sampled, trials=2_000)
    assert accepted_at.tolist() == [2_000] * K
    assert chi_square_p_value(counts[K], p[K]) > MIN_P_VALUE


def test_top_p_tokens_outside_the_nucleus_never_appear() -> None:
    generator = torch.Generator().manual_seed(5)
    logits = torch.randn(K + 1, VOCAB, generator=generator)
    p = probabilities(logits, SamplingParams(temperature=1.0, top_p=0.7))
    q = probabilities(torch.randn(K, VOCAB, generator=generator), SamplingParams(temperature=1.0))
    kept = (p > 0).sum(dim=-1)
    assert ((kept > 2) & (kept < VOCAB)).all(), "the nucleus should keep several tokens and drop some"
    counts, _ = emitted_counts(p, q, verify_sampled, trials=6_000)
    for position in range(K + 1):
        assert chi_square_p_value(counts[position], p[position]) > MIN_P_VALUE


# ---- end to end: the decoder's sampled output on a tiny target --------------------------

PROMPT = [5, 6, 7, 8, 9, 3]
TEMPERATURE = 0.7
SEEDS = 700


def exact_marginals(target: torch.nn.Module, vocab: int) -> list[torch.Tensor]:
    """Exact laws of output tokens 0, 1 and 2 by enumerating every 2-token continuation."""
    params = SamplingParams(temperature=TEMPERATURE)
    firsts, seconds = torch.meshgrid(torch.arange(vocab), torch.arange(vocab), indexing="ij")
    batch = torch.cat(
        [torch.tensor(PROMPT).expand(vocab * vocab, -1), firsts.reshape(-1, 1), seconds.reshape(-1, 1)], dim=1
    )
    with torch.inference_mode():
        logits = target(batch).logits[:, -3:]
    law0 = probabilities(logits[0, 0], params)  # the same prompt in every row
    law1_given0 = probabilities(logits[::vocab, 1], params)  # [t0, t1]
    law2_given01 = probabilities(logits[:, 2], params).view(vocab, vocab, vocab)  # [t0, t1, t2]
    joint01 = law0[:, None] * law1_given0
    return [law0, joint01.sum(0), (joint01[:, :, None] * law2_given01).sum((0, 1))]


@pytest.mark.slow
def test_decoder_samples_follow_the_target_distribution() -> None:
    vocab = 16
    target = tiny_target("LlamaForCausalLM", vocab_size=vocab)
    # A head that knows only 10 of the 16 tokens: the others come only from residual draws.
    head = random_head(target, draft_token_ids=[0, 1, 3, 4, 6, 8, 9, 11, 12, 14])
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=2, eos_token_ids=[], pack_weights=False)
    laws = exact_marginals(target, vocab)

    speculative = torch.zeros(3, vocab, dtype=torch.long)
    plain = torch.zeros(3, vocab, dtype=torch.long)
    accepted = 0
    for seed in range(SEEDS):
        result = decoder.generate(PROMPT, max_new_tokens=3, temperature=TEMPERATURE, seed=seed)
        accepted += sum(result.accepted_per_step)
        for position, token in enumerate(result.token_ids):
            speculative[position, token] += 1
        for position, token in enumerate(
            decoder.generate_plain(PROMPT, max_new_tokens=3, temperature=TEMPERATURE, seed=seed).token_ids
        ):
            plain[position, token] += 1

    for position in range(3):
        assert chi_square_p_value(speculative[position], laws[position]) > MIN_P_VALUE, f"position {position}"
        assert chi_square_p_value(plain[position], laws[position]) > MIN_P_VALUE, f"plain position {position}"
    # Both branches of the rule were taken many times.
    assert 0.1 * SEEDS * 2 < accepted < 0.9 * SEEDS * 2


def test_same_seed_same_sample() -> None:
    target = tiny_target("LlamaForCausalLM")
    decoder = SpeculativeDecoder(target, random_head(target), num_speculative_tokens=3)
    first = decoder.generate(PROMPT, max_new_tokens=12, temperature=1.0, top_p=0.9, seed=7)
    again = decoder.generate(PROMPT, max_new_tokens=12, temperature=1.0, top_p=0.9, seed=7)
    assert first.token_ids == again.token_ids
