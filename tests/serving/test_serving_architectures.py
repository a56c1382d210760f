"""Every supported architecture is served with greedy output equal to ``generate``.

GPT-OSS's tiny target alternates sliding-window layers (an 8-token window) with full
ones and has learned attention sinks: prompts and replies here run well past the window,
so a mask without the window, or attention without the sinks, changes the output.
"""

from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedModel

from engine.heads.model import Eagle3DraftModel
from engine.packed_attention import PACKED_ATTENTION, PackedLayout, SequenceKV, packed_layout
from serving import FixedSpeculation, GenerationRequest, ServingEngine
from tests.speculative.engine_doubles import ARCHITECTURES, hf_greedy, oracle_head, random_head, tiny_target

PROMPTS = [
    [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14],
    [9, 9, 3],
    [70, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22],
]
NEW_TOKENS = [30, 24, 20]


def _serve(target: PreTrainedModel, head: Eagle3DraftModel | None, k: int) -> list[list[int]]:
    with ServingEngine(target, head, speculation=FixedSpeculation(k), max_batch_size=2) as engine:
        handles = [engine.submit(GenerationRequest(p, n)) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
        return [handle.wait(120) for handle in handles]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("drafting", ["plain", "random", "oracle"])
def test_every_architecture_serves_generate_output(architecture: str, drafting: str) -> None:
    target = tiny_target(architecture)
    target.generation_config.eos_token_id = None
    expected = [hf_greedy(target, p, n) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
    if drafting == "plain":
        outputs = _serve(target, None, 0)
    elif drafting == "random":
        outputs = _serve(target, random_head(target), 3)
    else:
        # Long accepted runs: verification of 5 tokens at once, well across the window.
        head = oracle_head(target, PROMPTS[0] + expected[0], wrong_at=(len(PROMPTS[0]) + 7,))
        outputs = _serve(target, head, 4)
    assert outputs == expected


def test_gpt_oss_window_and_sinks_change_the_output() -> None:
    """The comparison above would not notice a missing window or missing sinks unless
    they change GPT-OSS's greedy output over these lengths: check that they do."""
    target = tiny_target("GptOssForCausalLM")
    target.generation_config.eos_token_id = None
    prompt, new = PROMPTS[2], NEW_TOKENS[2]
    reference = hf_greedy(target, prompt, new)
    wide = tiny_target("GptOssForCausalLM")
    wide.generation_config.eos_token_id = None
    wide.config.sliding_window = 4096
    for layer in wide.model.layers:
        if layer.self_attn.sliding_window is not None:
            layer.self_attn.sliding_window = 4096
    assert hf_greedy(wide, prompt, new) != reference
    sinkless = tiny_target("GptOssForCausalLM")
    sinkless.generation_config.eos_token_id = None
    with torch.no_grad():
        for layer in sinkless.model.layers:
            layer.self_attn.sinks.fill_(-1e4)
    assert hf_greedy(sinkless, prompt, new) != reference


def test_sliding_layers_attend_to_their_window_only() -> None:
    """Packed attention of a long segment after a cache equals a full forward's."""
    target = tiny_target("GptOssForCausalLM")
    ids = list(range(3, 40))
    with torch.inference_mode():
        expected = target(torch.tensor([ids])).logits[0]
    target.set_attn_implementation(PACKED_ATTENTION)
    cache = SequenceKV(len(target.model.layers))
    logits = []
    with torch.inference_mode():
        for start, stop in [(0, 5), (5, 6), (6, 23), (23, 37)]:
            with packed_layout(PackedLayout(caches=[cache], lengths=[stop - start])):
                output = target(
                    input_ids=torch.tensor([ids[start:stop]]),
                    position_ids=torch.arange(start, stop).unsqueeze(0),
                    use_cache=False,
                )
            logits.append(output.logits[0])
    torch.testing.assert_close(torch.cat(logits), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("drafting", ["plain", "random-eagle2", "oracle"])
def test_a_linear_attention_target_is_served_with_generate_output(drafting: str) -> None:
    """Qwen3-Next runs one forward per sequence with its own recurrent state; rejected
    drafts are rolled back out of that state (engine.recurrent_target)."""
    target = tiny_target("Qwen3NextForCausalLM")
    target.generation_config.eos_token_id = None
    expected = [hf_greedy(target, p, n) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
    head: Eagle3DraftModel | None = None
    k = 0
    if drafting == "random-eagle2":
        head, k = random_head(target, variant="eagle2"), 3
    elif drafting == "oracle":
        head, k = oracle_head(target, PROMPTS[0] + expected[0], wrong_at=(len(PROMPTS[0]) + 7,)), 4
    # All three requests in the batch at once, so their states must stay apart. This tiny
    # target's greedy reply to PROMPTS[1] reaches its eos id, which hf_greedy runs past.
    with ServingEngine(target, head, speculation=FixedSpeculation(k), max_batch_size=3) as engine:
        handles = [
            engine.submit(GenerationRequest(p, n, ignore_eos=True))
            for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)
        ]
        outputs = [handle.wait(120) for handle in handles]

    assert outputs == expected
    accepted = [a for handle in handles for a in handle.stats.accepted_per_step]
    if drafting == "random-eagle2":
        # A random head misses nearly always: nearly every step rolls the state back.
        assert sum(accepted) < len(accepted)
    if drafting == "oracle":
        assert 4 in accepted  # long accepted runs as well as rejections
