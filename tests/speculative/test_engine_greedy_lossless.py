"""Greedy speculative decoding returns exactly what plain greedy decoding returns."""

from __future__ import annotations

import pytest
import torch

from engine.drafting.tree_draft import TreeShape
from speculative import SpeculativeDecoder
from tests.speculative.engine_doubles import ARCHITECTURES, hf_greedy, oracle_head, random_head, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("pack_weights", [True, False])
def test_random_head_output_equals_hf_generate(architecture: str, pack_weights: bool) -> None:
    target = tiny_target(architecture)
    decoder = SpeculativeDecoder(
        target, random_head(target), num_speculative_tokens=3, pack_weights=pack_weights
    )
    expected = hf_greedy(target, PROMPT, 40)

    speculative = decoder.generate(PROMPT, max_new_tokens=40)
    plain = decoder.generate_plain(PROMPT, max_new_tokens=40)

    assert speculative.token_ids == expected
    assert plain.token_ids == expected
    assert speculative.num_verify_steps > 0


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("num_speculative_tokens", [1, 4])
def test_oracle_head_is_accepted_and_output_unchanged(architecture: str, num_speculative_tokens: int) -> None:
    target = tiny_target(architecture)
    # No EOS, so the whole 48-token run is speculated (GPT-OSS's tiny model emits EOS early).
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 48)
    head = oracle_head(target, PROMPT + expected)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=num_speculative_tokens)

    result = decoder.generate(PROMPT, max_new_tokens=48)

    assert result.token_ids == expected
    # Every full step accepts all K drafts; only the last, shortened step may propose fewer.
    assert all(a == p for a, p in zip(result.accepted_per_step, result.proposed_per_step, strict=True))
    assert result.tau > num_speculative_tokens
    # 1 prefill + one verification per K+1 tokens after the first.
    assert result.num_target_forwards == 1 + -(-(48 - 1) // (num_speculative_tokens + 1))


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "GptOssForCausalLM"])
def test_partially_wrong_head_rolls_back_to_exact_output(architecture: str) -> None:
    """Misses at varied draft positions exercise every rollback length (0..K)."""
    target = tiny_target(architecture)
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 60)
    wrong = {len(PROMPT) + i for i in range(60) if i % 7 in (2, 3) or i % 11 == 5}
    head = oracle_head(target, PROMPT + expected, wrong_at=wrong)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=5)

    result = decoder.generate(PROMPT, max_new_tokens=60)

    assert result.token_ids == expected
    assert set(result.accepted_per_step) >= {0, 1, 5}
    assert len(set(result.accepted_per_step)) >= 4


def test_restricted_draft_vocabulary_maps_ids_and_stays_exact() -> None:
    """A head whose vocabulary lacks some target tokens drafts through d2t and misses those."""
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 40)
    missing = sorted(set(expected))[::2]  # half of the tokens the target will produce
    kept = [token for token in range(target.config.vocab_size) if token not in missing]
    head = oracle_head(target, PROMPT + expected, draft_token_ids=kept)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=3)

    result = decoder.generate(PROMPT, max_new_tokens=40)

    assert result.token_ids == expected
    assert 0 < sum(result.accepted_per_step) < sum(result.proposed_per_step)
    drafted_missing = [t for t in expected if t in missing]
    assert drafted_missing, "the test needs the target to produce tokens outside the draft vocabulary"


def test_prompt_as_tensor_and_bad_prompts() -> None:
    target = tiny_target("LlamaForCausalLM")
    decoder = SpeculativeDecoder(target, random_head(target), num_speculative_tokens=2)
    as_list = decoder.generate(PROMPT, max_new_tokens=5).token_ids
    assert decoder.generate(torch.tensor([PROMPT]), max_new_tokens=5).token_ids == as_list
    assert decoder.generate(torch.tensor(PROMPT), max_new_tokens=5).token_ids == as_list
    with pytest.raises(ValueError, match="prompt_ids is empty"):
        decoder.generate([], max_new_tokens=5)
    with pytest.raises(ValueError, match=r"outside the vocabulary 0\.\.95: \[96\]"):
        decoder.generate([1, 96], max_new_tokens=5)
    with pytest.raises(ValueError, match="batch 1"):
        decoder.generate(torch.tensor([PROMPT, PROMPT]), max_new_tokens=5)


def test_head_for_another_target_is_refused() -> None:
    target = tiny_target("LlamaForCausalLM")
    other = tiny_target("LlamaForCausalLM", vocab_size=64)
    with pytest.raises(ValueError, match="head vocab_size 64 != target vocabulary size 96"):
        SpeculativeDecoder(target, random_head(other))


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "Qwen3MoeForCausalLM"])
def test_eagle2_head_chains_and_trees_equal_hf_generate(architecture: str) -> None:
    """EAGLE-2 drafts with the same chain and tree machinery as EAGLE-3."""
    target = tiny_target(architecture)
    expected = hf_greedy(target, PROMPT, 30)
    decoder = SpeculativeDecoder(target, random_head(target, variant="eagle2"), num_speculative_tokens=3)

    chain = decoder.generate(PROMPT, max_new_tokens=30)
    tree = decoder.generate(PROMPT, max_new_tokens=30, tree=TreeShape(depth=3, top_k=2, num_nodes=6))

    assert chain.token_ids == expected
    assert tree.token_ids == expected
