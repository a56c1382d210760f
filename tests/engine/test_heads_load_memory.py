"""load_head copies the target's embedding table into the head without a float32 copy of it
first: on a GPU a bf16 table's float32 copy (2 GB for 128k x 4,096) only raised the peak."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from engine.capture import input_embedding_weight
from engine.heads.config import Eagle3HeadConfig
from engine.heads.export import export_head, load_head
from engine.heads.model import Eagle3DraftModel
from tests.fixtures.torch_calls import CountingCalls
from trainer.models.tiny import build_tiny_target

VOCAB = 300


def test_a_bfloat16_targets_table_is_copied_in_without_a_float32_copy(tmp_path: Path) -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)
    head = Eagle3DraftModel(Eagle3HeadConfig.from_target(target.config, draft_vocab_size=40))
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[:40] = True
    head.set_draft_vocab(torch.zeros(40, dtype=torch.long), t2d)
    head_dir = export_head(head, tmp_path / "head")
    bf16_target = torch.nn.Module.to(copy.deepcopy(target), torch.bfloat16)
    table = input_embedding_weight(bf16_target)

    def whole_table_cast(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        casting = func in {torch.Tensor.float, torch.Tensor.to}
        return casting and bool(args) and isinstance(args[0], torch.Tensor) and args[0].shape == table.shape

    with CountingCalls(whole_table_cast) as casts:
        loaded = load_head(head_dir, bf16_target)

    assert casts.count == 0
    assert loaded.embed_tokens.weight.dtype == torch.float32
    assert torch.equal(loaded.embed_tokens.weight, table.float())
