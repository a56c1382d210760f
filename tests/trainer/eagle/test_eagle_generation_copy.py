"""The bfloat16 copy of the target that distillation generates with."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from trainer.eagle.data import generation_copy
from trainer.models.tiny import build_tiny_target

VOCAB = 259


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "GptOssForCausalLM", "Qwen3NextForCausalLM"])
def test_the_copy_is_the_targets_weights_in_bfloat16(architecture: str) -> None:
    target = build_tiny_target(architecture, vocab_size=VOCAB, seed=3)
    expected = torch.nn.Module.to(copy.deepcopy(target), torch.bfloat16)  # the copy as it was made before

    generator = generation_copy(target, bf16=True)

    assert generator is not target
    mine, theirs = generator.state_dict(), expected.state_dict()
    assert mine.keys() == theirs.keys()
    for name, tensor in mine.items():
        assert tensor.dtype == theirs[name].dtype, name
        assert torch.equal(tensor, theirs[name]), name
    ids = torch.tensor([[5, 9, 42, 7, 100]])
    with torch.no_grad():
        assert torch.equal(generator(ids).logits, expected(ids).logits)
    # The target is untouched: float32, and its own tensors.
    assert all(p.dtype == torch.float32 for p in target.parameters())
    assert not {p.data_ptr() for p in target.parameters()} & {p.data_ptr() for p in generator.parameters()}


def test_tied_embeddings_stay_one_parameter() -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB, seed=3)
    target.lm_head.weight = target.model.embed_tokens.weight  # SmolLM2 ties them

    generator: Any = generation_copy(target, bf16=True)

    assert generator.lm_head.weight is generator.model.embed_tokens.weight


def test_no_float32_copy_of_a_parameter_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Copying the model whole before converting it held a second float32 target on the GPU."""
    target = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB, seed=3)

    def refuse(parameter: torch.nn.Parameter, memo: dict[int, Any]) -> torch.nn.Parameter:
        raise AssertionError(f"a {parameter.dtype} parameter of shape {tuple(parameter.shape)} was copied")

    monkeypatch.setattr(torch.nn.Parameter, "__deepcopy__", refuse)
    generator = generation_copy(target, bf16=True)

    assert all(p.dtype == torch.bfloat16 for p in generator.parameters())


def test_without_bfloat16_the_target_itself_generates() -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB, seed=3)
    assert generation_copy(target, bf16=False) is target
