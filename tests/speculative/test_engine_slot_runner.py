"""Batch-1 decoding on the slot pool (what a GPU runs), checked on CPU: plain and speculative
greedy output agree with transformers' greedy decoding; rejected drafts roll back."""

from __future__ import annotations

import pytest

from engine.drafting.batch_draft import SlotDrafter
from engine.drafting.tree_draft import TreeShape
from engine.slot_target_runner import SlotTargetRunner
from speculative import SpeculativeDecoder
from tests.speculative.engine_doubles import hf_greedy, oracle_head, random_head_decoder, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9]


def agreement(ours: list[int], reference: list[int]) -> float:
    return sum(a == b for a, b in zip(ours, reference, strict=True)) / len(reference)


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "GptOssForCausalLM"])
def test_plain_and_speculative_decoding_on_the_slot_pool_agree_with_greedy(architecture: str) -> None:
    target = tiny_target(architecture)
    expected = hf_greedy(target, PROMPT, 40)
    plain = SpeculativeDecoder(target, eos_token_ids=[], slot_pool=True, pack_weights=False)
    assert isinstance(plain._target, SlotTargetRunner)
    assert agreement(plain.generate_plain(PROMPT, max_new_tokens=40).token_ids, expected) >= 0.99
    # A random head: nearly every draft is rejected, so every round rolls the pool back.
    speculative = random_head_decoder(target)
    result = speculative.generate(PROMPT, max_new_tokens=40)
    assert agreement(result.token_ids, expected) >= 0.99
    assert result.proposed_per_step


def test_accepted_runs_and_a_tree_request_on_the_slot_pool() -> None:
    target = tiny_target("LlamaForCausalLM")
    expected = hf_greedy(target, PROMPT, 32)
    decoder = SpeculativeDecoder(
        target,
        oracle_head(target, PROMPT + expected),
        num_speculative_tokens=4,
        eos_token_ids=[],
        slot_pool=True,
        pack_weights=False,
    )
    # The slot-pool decoder drafts on a head slot pool too (the serving engine's drafter).
    assert isinstance(decoder._drafter, SlotDrafter)
    result = decoder.generate(PROMPT, max_new_tokens=32)
    assert result.token_ids == expected
    assert result.tau > 4
    # Trees need the exact runner: the slot pool verifies a chain of the tree's depth instead.
    tree = decoder.generate(PROMPT, max_new_tokens=32, tree=TreeShape.parse("3x2x4"))
    assert tree.token_ids == expected


def test_the_target_is_the_callers_again_between_slot_pool_sessions() -> None:
    """A GPU job runs speculative decoding and then, in the same process and on the same model,
    plain transformers forwards (a training step's features, generate): between sessions the
    model must have its own attention back and none of the recorder's hooks."""
    target = tiny_target("LlamaForCausalLM")
    attention = target.config._attn_implementation
    expected = hf_greedy(target, PROMPT, 16)
    decoder = random_head_decoder(target)
    first = decoder.generate(PROMPT, max_new_tokens=16)

    assert target.config._attn_implementation == attention
    layers = target.model.layers
    assert not any(layer._forward_pre_hooks for layer in layers)
    assert not target.model.norm._forward_hooks
    assert hf_greedy(target, PROMPT, 16) == expected
    # And the runner, its graphs and its recorder serve the next session as before.
    assert decoder.generate(PROMPT, max_new_tokens=16).token_ids == first.token_ids
    assert decoder.generate_plain(PROMPT, max_new_tokens=16).token_ids == first.token_ids
    assert target.config._attn_implementation == attention
