"""Acceptance accounting: tau = accepted + 1 per verification, acceptance by position."""

from __future__ import annotations

import pytest

from speculative import SpeculativeDecoder, acceptance_by_position
from tests.speculative.engine_doubles import hf_greedy, oracle_head, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14]
K = 4


def test_tau_and_positions_follow_the_wrong_drafts() -> None:
    target = tiny_target("Qwen3ForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 80)
    # The head misses every 4th token of the output: runs of accepted drafts end there.
    wrong = {len(PROMPT) + i for i in range(80) if i % 4 == 3}
    head = oracle_head(target, PROMPT + expected, wrong_at=wrong)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=K)
    # Output token 0 comes from the prefill; step 1 drafts tokens 1-4 and misses 3 (2 accepted,
    # the bonus is token 3); every later step drafts 4j..4j+3 and misses 4j+3 (3 accepted).
    # 1 + 3 + 18 * 4 tokens end exactly on a step: nothing is cut at the end, and the last
    # step, with 4 tokens left to emit, drafts only 3.
    result = decoder.generate(PROMPT, max_new_tokens=76)

    assert result.token_ids == expected[:76]
    assert result.accepted_per_step == [2] + [3] * 18
    assert result.proposed_per_step == [K] * 18 + [3]
    assert result.tau == pytest.approx(75 / 19)
    assert result.tau == pytest.approx((sum(result.accepted_per_step) + 19) / 19)
    assert len(result.token_ids) == 1 + sum(a + 1 for a in result.accepted_per_step)
    assert result.num_target_forwards == 1 + result.num_verify_steps
    assert result.acceptance_by_position == pytest.approx([1.0, 1.0, 18 / 19, 0.0])
    assert sum(result.acceptance_by_position) == pytest.approx(result.tau - 1)


def test_timings_are_accounted() -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 20)
    decoder = SpeculativeDecoder(target, oracle_head(target, PROMPT + expected), num_speculative_tokens=K)

    result = decoder.generate(PROMPT, max_new_tokens=20)
    plain = decoder.generate_plain(PROMPT, max_new_tokens=20)

    for run in (result, plain):
        assert 0 < run.prefill_seconds < run.seconds
        assert run.prefill_seconds + run.draft_seconds + run.target_seconds <= run.seconds
        assert run.tokens_per_second == pytest.approx(20 / run.seconds)
    assert result.draft_seconds > 0
    assert plain.draft_seconds == 0
    assert plain.num_verify_steps == 0
    assert plain.tau == 0.0


def test_acceptance_by_position_counts_only_steps_that_proposed_the_position() -> None:
    # Three steps of 3 drafts and a last one of 1 draft.
    assert acceptance_by_position([3, 0, 1, 1], [3, 3, 3, 1]) == [3 / 4, 1 / 3, 1 / 3]
    assert acceptance_by_position([], []) == []
