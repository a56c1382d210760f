"""A head cast to bfloat16 (every head beside a bfloat16 target: every head on a GPU) turns its
queries and keys by the float32 frequencies it was trained with, as vLLM and SGLang do."""

from __future__ import annotations

import torch

from tests.speculative.engine_doubles import random_head, tiny_target


def test_a_bfloat16_head_keeps_float32_rope_frequencies() -> None:
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target)
    trained = head.rotary_emb.inv_freq.clone()
    assert trained.dtype == torch.float32

    cast = random_head(target).to(dtype=torch.bfloat16)

    assert cast.lm_head.weight.dtype == torch.bfloat16  # the head itself is cast
    for name in ("inv_freq", "original_inv_freq"):
        kept = getattr(cast.rotary_emb, name)
        assert kept.dtype == torch.float32, name
        assert torch.equal(kept, trained), name
    # Far apart positions: rounded frequencies would turn the angles by a visible amount there.
    hidden = torch.zeros(1, 1, head.config.hidden_size, dtype=torch.bfloat16)
    positions = torch.tensor([[3000]])
    cos, sin = cast.rotary_emb(hidden, positions)
    want_cos, want_sin = head.rotary_emb(hidden.float(), positions)
    assert cos.dtype == torch.bfloat16
    assert torch.equal(cos, want_cos.to(torch.bfloat16))
    assert torch.equal(sin, want_sin.to(torch.bfloat16))
