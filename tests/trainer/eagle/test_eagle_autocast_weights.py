"""The target's layers lend bf16 copies of their weights to a feature pass under autocast:
the same features bit for bit, the target's own fp32 weights back afterwards."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from engine.capture import SUPPORTED_ARCHITECTURES, decoder_layers
from trainer.eagle.autocast_weights import AutocastWeights
from trainer.eagle.features import TargetTeacher
from trainer.models.tiny import build_tiny_target

AUX = [2, 4, 5]


@pytest.mark.parametrize("architecture", SUPPORTED_ARCHITECTURES)
def test_features_with_lent_copies_are_autocasts_own_bit_for_bit(
    architecture: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = build_tiny_target(architecture, vocab_size=300)
    ids = torch.arange(0, 300, 5)
    input_ids = torch.randint(3, 300, (2, 16), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(input_ids)
    lent = TargetTeacher(target, AUX, draft_target_ids=ids, autocast_bf16=True)
    assert lent._autocast_weights is not None
    assert lent._autocast_weights.bytes > 0
    cast_each_time = TargetTeacher(target, AUX, draft_target_ids=ids, autocast_bf16=True)
    monkeypatch.setattr(cast_each_time, "_autocast_weights", None)
    kept = {name: p.clone() for name, p in target.named_parameters()}

    ours, autocasts = lent.features(input_ids, mask), cast_each_time.features(input_ids, mask)

    assert torch.equal(ours.aux_hidden_states, autocasts.aux_hidden_states)
    assert torch.equal(ours.final_hidden, autocasts.final_hidden)
    assert torch.equal(ours.argmax_ids, autocasts.argmax_ids)
    # The target's own weights are back, unchanged and in fp32.
    for name, parameter in target.named_parameters():
        assert parameter.dtype == torch.float32, name
        assert torch.equal(parameter, kept[name]), name


def test_a_forward_borrows_the_copies_only_inside_the_block_even_when_it_fails() -> None:
    layers = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2, bias=False), nn.LayerNorm(2))
    weights = AutocastWeights(layers)
    assert weights.bytes == (4 * 3 + 3 + 3 * 2) * 2  # the Linears' weights and bias, not the norm's
    seen: list[set[torch.dtype]] = []

    def failing_pass() -> None:
        with weights.lent():
            seen.append({layers[0].weight.dtype, layers[0].bias.dtype, layers[1].weight.dtype})
            seen.append({layers[2].weight.dtype})
            raise RuntimeError("mid-pass")

    with pytest.raises(RuntimeError, match="mid-pass"):
        failing_pass()
    assert seen == [{torch.bfloat16}, {torch.float32}]
    assert {p.dtype for p in layers.parameters()} == {torch.float32}


def test_a_model_whose_copies_would_not_fit_is_left_to_autocast() -> None:
    layers = decoder_layers(build_tiny_target("LlamaForCausalLM", vocab_size=300))
    assert AutocastWeights(layers, max_bytes=1024).bytes == 0
    assert AutocastWeights(layers).bytes > 1024


def test_a_tied_lm_head_borrows_a_copy_while_the_embedding_keeps_its_fp32_weight() -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=300)  # tie_word_embeddings
    embedding, lm_head = target.get_input_embeddings(), target.get_output_embeddings()
    assert lm_head.weight is embedding.weight
    teacher = TargetTeacher(target, AUX, draft_target_ids=torch.arange(0, 300, 5), autocast_bf16=True)
    assert teacher._autocast_weights is not None
    with teacher._autocast_weights.lent():
        assert lm_head.weight.dtype == torch.bfloat16
        assert embedding.weight.dtype == torch.float32
    assert lm_head.weight is embedding.weight
