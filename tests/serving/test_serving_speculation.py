"""Adaptive K: deep when drafts are accepted and the batch is small, shallow otherwise."""

from __future__ import annotations

import pytest

from serving import AdaptiveSpeculation, GenerationRequest, ServingEngine
from tests.speculative.engine_doubles import hf_greedy, oracle_head, random_head, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9]


def test_threshold_rises_with_batch_size_so_k_falls() -> None:
    policy = AdaptiveSpeculation(max_tokens=6, rates=[0.8] * 6)
    depths = [policy.num_tokens(batch) for batch in (1, 2, 4, 8, 16)]
    assert depths == sorted(depths, reverse=True)
    assert depths[0] > depths[-1]
    assert policy.threshold(1) < policy.threshold(8) == policy.threshold(16)


def test_rates_follow_observed_acceptance() -> None:
    policy = AdaptiveSpeculation(max_tokens=4)
    for _ in range(200):
        policy.observe(proposed=4, accepted=0)
    assert policy.num_tokens(1) == 0  # backed off to plain decoding
    assert policy.rates[0] < 0.05
    assert policy.rates[1:] == [pytest.approx(0.7)] * 3  # never judged, never moved
    for _ in range(200):
        policy.observe(proposed=4, accepted=4)
    assert policy.num_tokens(1) == 4


def test_backed_off_policy_drafts_nothing_but_probes_one_step_in_probe_every() -> None:
    policy = AdaptiveSpeculation(max_tokens=4, probe_every=8, rates=[0.01] * 4)
    ks = [policy.num_tokens(1) for _ in range(32)]
    assert ks == ([0] * 7 + [1]) * 4
    # A probe that is accepted again and again brings drafting back.
    for _ in range(100):
        policy.observe(proposed=1, accepted=1)
    assert policy.num_tokens(1) >= 1


def test_engine_drafts_deep_for_a_good_head_and_shallow_for_a_bad_one() -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 120)
    good = AdaptiveSpeculation(max_tokens=5)
    with ServingEngine(target, oracle_head(target, PROMPT + expected), speculation=good) as engine:
        assert engine.generate(GenerationRequest(PROMPT, 120), timeout=60) == expected
        deep = engine.metrics.mean_speculative_tokens
    bad = AdaptiveSpeculation(max_tokens=5)
    with ServingEngine(target, random_head(target), speculation=bad) as engine:
        assert engine.generate(GenerationRequest(PROMPT, 120), timeout=60) == expected
        shallow = engine.metrics.mean_speculative_tokens
    assert deep > 4.5
    assert shallow < 2.5


def test_engine_with_a_head_that_is_never_right_decodes_almost_plainly() -> None:
    """Adaptive K backs off to plain decoding when nothing is accepted (never slower)."""
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 200)
    policy = AdaptiveSpeculation(max_tokens=5, prior=0.3, rates=[0.0] * 5, probe_every=16)
    with ServingEngine(target, random_head(target), speculation=policy) as engine:
        assert engine.generate(GenerationRequest(PROMPT, 200), timeout=60) == expected
        assert engine.metrics.mean_speculative_tokens < 0.1
