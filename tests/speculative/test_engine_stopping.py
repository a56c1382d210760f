"""Generation stops at max_new_tokens and at EOS, and never emits past either."""

from __future__ import annotations

import pytest

from speculative import SpeculativeDecoder
from tests.speculative.engine_doubles import hf_greedy, oracle_head, random_head, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14]


@pytest.mark.parametrize("max_new_tokens", [1, 2, 3, 4, 5, 6, 9, 13])
def test_max_new_tokens_is_exact_with_long_accepted_runs(max_new_tokens: int) -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 16)
    decoder = SpeculativeDecoder(target, oracle_head(target, PROMPT + expected), num_speculative_tokens=4)

    result = decoder.generate(PROMPT, max_new_tokens=max_new_tokens)
    plain = decoder.generate_plain(PROMPT, max_new_tokens=max_new_tokens)

    assert result.token_ids == expected[:max_new_tokens]
    assert plain.token_ids == expected[:max_new_tokens]
    assert result.finish_reason == plain.finish_reason == "length"
    # No verification ever proposes more drafts than tokens it could still emit.
    emitted = 1
    for proposed, accepted in zip(result.proposed_per_step, result.accepted_per_step, strict=True):
        assert proposed + 1 <= max_new_tokens - emitted
        emitted += accepted + 1
    assert plain.num_target_forwards == max_new_tokens


@pytest.mark.parametrize("head_kind", ["oracle", "random"])
def test_stops_after_eos_inside_an_accepted_run(head_kind: str) -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    free_run = hf_greedy(target, PROMPT, 30)
    # The first token that appears after position 5 for the first time becomes EOS.
    stop_at = next(i for i in range(5, 30) if free_run[i] not in free_run[:i])
    eos = free_run[stop_at]
    target.generation_config.eos_token_id = eos
    expected = hf_greedy(target, PROMPT, 30)
    assert expected == free_run[: stop_at + 1]
    head = oracle_head(target, PROMPT + free_run) if head_kind == "oracle" else random_head(target)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=4)

    result = decoder.generate(PROMPT, max_new_tokens=30)
    plain = decoder.generate_plain(PROMPT, max_new_tokens=30)

    assert result.token_ids == expected
    assert plain.token_ids == expected
    assert result.finish_reason == plain.finish_reason == "eos"
    if head_kind == "oracle":
        # The run that held EOS was accepted further than EOS: the cut came from EOS, not the target.
        assert sum(a + 1 for a in result.accepted_per_step) + 1 > len(expected)


def test_eos_as_first_token_stops_before_any_speculation() -> None:
    target = tiny_target("LlamaForCausalLM")
    first = hf_greedy(target, PROMPT, 1)[0]
    decoder = SpeculativeDecoder(target, random_head(target), num_speculative_tokens=3, eos_token_ids=[first])

    result = decoder.generate(PROMPT, max_new_tokens=20)

    assert result.token_ids == [first]
    assert result.finish_reason == "eos"
    assert result.num_verify_steps == 0
    assert result.num_target_forwards == 1


def test_eos_ids_default_to_the_generation_config() -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = [7, 9]
    assert SpeculativeDecoder(target).eos_token_ids == frozenset({7, 9})
    target.generation_config.eos_token_id = 4
    assert SpeculativeDecoder(target).eos_token_ids == frozenset({4})


@pytest.mark.parametrize("bad", [0, -3])
def test_max_new_tokens_must_be_positive(bad: int) -> None:
    target = tiny_target("LlamaForCausalLM")
    decoder = SpeculativeDecoder(target, random_head(target))
    with pytest.raises(ValueError, match=f"max_new_tokens must be at least 1, got {bad}"):
        decoder.generate(PROMPT, max_new_tokens=bad)
    with pytest.raises(ValueError, match="num_speculative_tokens must be at least 1, got 0"):
        SpeculativeDecoder(target, num_speculative_tokens=0)
