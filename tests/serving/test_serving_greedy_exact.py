"""Batched greedy output equals each request's plain greedy decoding alone."""

from __future__ import annotations

import pytest

from serving import FixedSpeculation, GenerationRequest, ServingEngine
from tests.speculative.engine_doubles import hf_greedy, oracle_head, random_head, tiny_target

PROMPTS = [
    [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14],
    [9, 9, 3],
    [70, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22],
    [4],
    [30, 31, 32, 33, 34, 35],
]
NEW_TOKENS = [40, 12, 33, 25, 18]


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "Qwen3ForCausalLM"])
@pytest.mark.parametrize("num_speculative_tokens", [0, 3])
def test_concurrent_requests_equal_hf_generate(architecture: str, num_speculative_tokens: int) -> None:
    target = tiny_target(architecture)
    target.generation_config.eos_token_id = None  # full lengths: requests leave at different steps
    expected = [hf_greedy(target, p, n) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
    head = random_head(target) if num_speculative_tokens else None
    # Batch 3 for 5 requests: later ones join as earlier ones finish.
    with ServingEngine(
        target, head, speculation=FixedSpeculation(num_speculative_tokens), max_batch_size=3
    ) as engine:
        handles = [engine.submit(GenerationRequest(p, n)) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
        outputs = [handle.wait(60) for handle in handles]
        drafter = engine.drafter  # closing the engine lets go of it

    assert outputs == expected
    assert all(handle.finish_reason == "length" for handle in handles)
    if num_speculative_tokens:
        assert all(handle.stats.proposed_per_step for handle in handles)
        assert engine.metrics.mean_speculative_tokens == num_speculative_tokens
        # Five requests through three draft slots: each finished request gave its slot back.
        assert drafter is not None
        assert drafter.slots.in_use == 0


def test_ragged_acceptance_keeps_every_output_exact() -> None:
    """Two requests the oracle knows (long accepted runs) next to one it does not."""
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    known, unknown = PROMPTS[0], PROMPTS[2]
    expected_known = hf_greedy(target, known, 48)
    expected_unknown = hf_greedy(target, unknown, 30)
    head = oracle_head(target, known + expected_known)
    with ServingEngine(target, head, speculation=FixedSpeculation(4), max_batch_size=4) as engine:
        long = engine.submit(GenerationRequest(known, 48))
        short = engine.submit(GenerationRequest(known, 20))
        other = engine.submit(GenerationRequest(unknown, 30))
        assert long.wait(60) == expected_known
        assert short.wait(60) == expected_known[:20]
        assert other.wait(60) == expected_unknown

    assert all(
        a == p for a, p in zip(long.stats.accepted_per_step, long.stats.proposed_per_step, strict=True)
    )
    assert long.stats.tau > 4
    assert other.stats.tau < 2
    assert engine.metrics.num_accepted_tokens._value.get() == sum(
        sum(h.stats.accepted_per_step) for h in (long, short, other)
    )


def test_eos_ends_a_request_and_ignore_eos_overrides_it() -> None:
    target = tiny_target("LlamaForCausalLM")
    reference = hf_greedy(target, PROMPTS[1], 30)
    eos = reference[5]  # pretend the sixth generated token is the end of sequence
    with ServingEngine(target, eos_token_ids=[eos]) as engine:
        stopped = engine.submit(GenerationRequest(PROMPTS[1], 30))
        ignored = engine.submit(GenerationRequest(PROMPTS[1], 30, ignore_eos=True))
        assert stopped.wait(60) == reference[: reference.index(eos) + 1]
        assert ignored.wait(60) == reference
    assert stopped.finish_reason == "eos"
    assert ignored.finish_reason == "length"


def test_cancelled_request_leaves_and_others_continue() -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPTS[0], 30)
    with ServingEngine(target, max_batch_size=2) as engine:
        doomed = engine.submit(GenerationRequest(PROMPTS[2], 10_000))
        doomed.cancel()
        kept = engine.submit(GenerationRequest(PROMPTS[0], 30))
        assert kept.wait(60) == expected
        doomed.wait(60)
    assert doomed.finish_reason == "cancelled"
    assert len(doomed.token_ids) < 10_000


def test_bad_requests_are_refused_with_the_reason() -> None:
    target = tiny_target("LlamaForCausalLM")
    with pytest.raises(ValueError, match="empty"):
        GenerationRequest([], 5)
    with pytest.raises(ValueError, match="max_new_tokens"):
        GenerationRequest([1], 0)
    with ServingEngine(target) as engine, pytest.raises(ValueError, match="outside the vocabulary"):
        engine.submit(GenerationRequest([1, 10_000], 5))
    with pytest.raises(ValueError, match="needs a draft head"):
        ServingEngine(target, speculation=FixedSpeculation(2))
