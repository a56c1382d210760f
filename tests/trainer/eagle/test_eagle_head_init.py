"""A new head's starting point."""

from __future__ import annotations

import torch

from engine.heads.config import Eagle3HeadConfig
from engine.heads.model import Eagle3DraftModel
from trainer.eagle.head_init import init_head_from_target
from trainer.models.tiny import build_tiny_target


def test_lm_head_mode_copies_the_targets_output_layer_rows_and_random_copies_nothing() -> None:
    target = build_tiny_target("Qwen3MoeForCausalLM", vocab_size=300)
    kept = torch.arange(0, 300, 2)[:120]
    for mode in ("lm_head", "random"):
        torch.manual_seed(0)
        head = Eagle3DraftModel(Eagle3HeadConfig.from_target(target.config, draft_vocab_size=120))
        before = head.fc.weight.clone()
        init_head_from_target(head, target, target.lm_head.weight.detach()[kept], mode)
        copied = torch.equal(head.lm_head.weight, target.lm_head.weight[kept])
        assert copied == (mode == "lm_head")
        assert torch.equal(head.norm.weight, target.model.norm.weight) == (mode == "lm_head")
        assert torch.equal(head.fc.weight, before)
