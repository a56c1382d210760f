"""The per-sequence target behind the serving engine for linear-attention models."""

from __future__ import annotations

import pytest
import torch

from engine.packed_target import PackedTarget
from engine.recurrent_target import RecurrentTarget
from engine.segments import Segment
from tests.speculative.engine_doubles import hf_greedy, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14]


@torch.inference_mode()
def test_a_crop_undoes_the_rejected_tokens_of_the_last_forward_only() -> None:
    model = tiny_target("Qwen3NextForCausalLM")
    model.generation_config.eos_token_id = None
    expected = hf_greedy(model, PROMPT, 3)
    target = RecurrentTarget(model, None)
    cache = target.new_cache()
    first = target.forward([Segment(cache, PROMPT, keep=1)])[0]
    assert int(first.logits[-1].argmax()) == expected[0]

    # The right token followed by two wrong drafts; keep the right one only.
    target.forward([Segment(cache, [expected[0], 1, 1], keep=3)])
    cache.crop(len(PROMPT) + 1)
    assert cache.length == len(PROMPT) + 1
    with pytest.raises(RuntimeError, match="only its last forward"):
        cache.crop(len(PROMPT))
    with pytest.raises(ValueError, match="cannot crop a cache of 13 positions to 14"):
        cache.crop(len(PROMPT) + 2)

    # The recurrent state is the one plain decoding has: same next logits as a cache that
    # never saw the rejected tokens.
    output = target.forward([Segment(cache, [expected[1]], keep=1)])[0]
    plain = target.new_cache()
    for tokens in (PROMPT, [expected[0]]):
        target.forward([Segment(plain, tokens, keep=1)])
    reference = target.forward([Segment(plain, [expected[1]], keep=1)])[0]
    torch.testing.assert_close(output.logits, reference.logits, rtol=1e-4, atol=1e-4)
    assert int(output.logits[-1].argmax()) == expected[2]


def test_each_target_refuses_the_other_ones_caches() -> None:
    model = tiny_target("Qwen3ForCausalLM")
    recurrent, packed = RecurrentTarget(model, None), PackedTarget(model, None)
    with pytest.raises(TypeError, match="RecurrentTarget runs on its own caches, not SequenceKV"):
        recurrent.forward([Segment(packed.new_cache(), PROMPT, keep=1)])
    with pytest.raises(TypeError, match="PackedTarget runs on its own SequenceKV caches"):
        packed.forward([Segment(recurrent.new_cache(), PROMPT, keep=1)])
