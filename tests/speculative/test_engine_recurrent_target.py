"""Speculative decoding on a target with recurrent state (Qwen3-Next's linear attention).

Rejected drafts have already been folded into the linear-attention state by the
verification forward; the engine must undo that (engine.recurrent_state), so the
output equals plain greedy decoding whatever is accepted.
"""

from __future__ import annotations

import pytest

from engine.drafting.tree_draft import TreeShape
from speculative import SpeculativeDecoder
from tests.speculative.engine_doubles import hf_greedy, oracle_head, random_head, tiny_target

QWEN3_NEXT = "Qwen3NextForCausalLM"
PROMPT = [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14]


@pytest.mark.parametrize("variant", ["eagle3", "eagle2"])
def test_random_head_output_equals_hf_greedy(variant: str) -> None:
    target = tiny_target(QWEN3_NEXT)
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 30)
    head = random_head(target, variant=variant)  # type: ignore[arg-type]
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=3, eos_token_ids=[])

    result = decoder.generate(PROMPT, max_new_tokens=30)

    assert result.token_ids == expected
    assert decoder.generate_plain(PROMPT, max_new_tokens=30).token_ids == expected
    # A random head misses nearly always: every step rolls back the recurrent state.
    assert sum(result.accepted_per_step) < len(result.accepted_per_step)


def test_rollback_of_every_length_keeps_the_recurrent_state_exact() -> None:
    target = tiny_target(QWEN3_NEXT)
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 50)
    wrong = {len(PROMPT) + i for i in range(50) if i % 7 in (2, 3) or i % 11 == 5}
    head = oracle_head(target, PROMPT + expected, wrong_at=wrong)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=5, eos_token_ids=[])

    result = decoder.generate(PROMPT, max_new_tokens=50)

    assert result.token_ids == expected
    # Full acceptance (no rollback), none, and partial ones in between all happened.
    assert {0, 5} <= set(result.accepted_per_step)
    assert len(set(result.accepted_per_step)) >= 4


def test_a_draft_tree_falls_back_to_a_chain_and_stays_exact() -> None:
    target = tiny_target(QWEN3_NEXT)
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 24)
    head = random_head(target, variant="eagle2")
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=3, eos_token_ids=[])

    result = decoder.generate(PROMPT, max_new_tokens=24, tree=TreeShape(depth=3, top_k=2, num_nodes=6))

    assert result.token_ids == expected
    assert set(result.proposed_per_step) <= {1, 2, 3}
