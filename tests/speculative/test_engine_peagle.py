"""A P-EAGLE head drafts K tokens in one head forward, and decoding stays lossless."""

from __future__ import annotations

import pytest
import torch

from engine.drafting.tree_draft import TreeShape
from serving import FixedSpeculation, GenerationRequest, ServingEngine
from speculative import SpeculativeDecoder, verification
from speculative import decoder as decoder_module
from tests.speculative.engine_doubles import hf_greedy, parallel_oracle_head, random_head, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14]


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "Qwen3ForCausalLM", "GptOssForCausalLM"])
@pytest.mark.parametrize("num_speculative_tokens", [1, 4])
def test_random_peagle_head_output_equals_plain_greedy(
    architecture: str, num_speculative_tokens: int
) -> None:
    target = tiny_target(architecture)
    expected = hf_greedy(target, PROMPT, 40)
    head = random_head(target, variant="peagle")
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=num_speculative_tokens)

    result = decoder.generate(PROMPT, max_new_tokens=40)

    assert result.token_ids == expected
    assert result.num_verify_steps > 0


def test_one_head_forward_drafts_all_k_tokens() -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 48)
    head = parallel_oracle_head(target, PROMPT + expected)
    calls: list[int] = []
    head.midlayer.register_forward_hook(lambda module, args, out: calls.append(int(out.shape[1])))
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=4, pack_weights=False)

    result = decoder.generate(PROMPT, max_new_tokens=48)

    assert result.token_ids == expected
    # The oracle is always right: every full step accepts all four drafts...
    assert result.accepted_per_step[:-1] == [4] * (len(result.accepted_per_step) - 1)
    # ... and each step ran the head's layer once (new entries + 3 mask slots), never a chain.
    assert len(calls) == result.num_verify_steps


def test_wrong_drafts_roll_back_to_the_exact_output() -> None:
    target = tiny_target("Qwen3ForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 60)
    wrong = {len(PROMPT) + i for i in range(60) if i % 7 in (2, 3) or i % 11 == 5}
    head = parallel_oracle_head(target, PROMPT + expected, wrong_at=wrong)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=5)

    result = decoder.generate(PROMPT, max_new_tokens=60)

    assert result.token_ids == expected
    assert sorted(set(result.accepted_per_step)) != [0]
    assert any(0 < accepted < 5 for accepted in result.accepted_per_step)


def test_sampling_verifies_with_the_rejection_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target, variant="peagle")
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=3)
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    real = verification.sampled_verdicts

    def spy(draft_ids: list[torch.Tensor], draft_probs: list[torch.Tensor], *args: object) -> object:
        (row,) = zip(draft_ids, draft_probs, strict=True)  # batch-1 decoding verifies one row
        seen.append(row)
        return real(draft_ids, draft_probs, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(decoder_module, "sampled_verdicts", spy)
    first = decoder.generate(PROMPT, max_new_tokens=24, temperature=0.9, top_p=0.95, seed=7)
    again = decoder.generate(PROMPT, max_new_tokens=24, temperature=0.9, top_p=0.95, seed=7)

    assert first.token_ids == again.token_ids
    assert len(seen) == first.num_verify_steps + again.num_verify_steps
    for draft_ids, draft_probs in seen:
        # One distribution per draft, and each draft was drawn from its own (p > 0).
        assert draft_probs.shape[0] == draft_ids.shape[0]
        torch.testing.assert_close(draft_probs.sum(-1), torch.ones(draft_ids.shape[0]))
        assert bool((draft_probs[torch.arange(draft_ids.shape[0]), draft_ids] > 0).all())


def test_a_peagle_head_cannot_draft_a_tree() -> None:
    target = tiny_target("LlamaForCausalLM")
    decoder = SpeculativeDecoder(target, random_head(target, variant="peagle"))
    with pytest.raises(ValueError, match="P-EAGLE head drafts a chain in one forward"):
        decoder.generate(PROMPT, max_new_tokens=8, tree=TreeShape(depth=3, top_k=2, num_nodes=6))


def test_serving_engine_batches_peagle_drafts_and_stays_exact() -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    prompts = [PROMPT, [9, 9, 3], [70, 1, 5, 6, 7, 8, 9, 10], [4]]
    lengths = [40, 12, 33, 25]
    expected = [hf_greedy(target, p, n) for p, n in zip(prompts, lengths, strict=True)]
    head = parallel_oracle_head(target, PROMPT + expected[0])
    with ServingEngine(target, head, speculation=FixedSpeculation(4), max_batch_size=3) as engine:
        handles = [engine.submit(GenerationRequest(p, n)) for p, n in zip(prompts, lengths, strict=True)]
        outputs = [handle.wait(60) for handle in handles]

    assert outputs == expected
    # The request the oracle knows gets long accepted runs beside those it does not.
    assert max(handles[0].stats.accepted_per_step) == 4
