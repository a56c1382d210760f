"""Tiny random targets of every supported architecture."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine.capture import SUPPORTED_ARCHITECTURES, UnsupportedArchitectureError
from trainer.models.tiny import (
    TINY_VOCAB_SIZE,
    build_tiny_target,
    tiny_target_config,
    write_tiny_target,
)


@pytest.mark.parametrize("architecture", SUPPORTED_ARCHITECTURES)
def test_tiny_target_is_float32_eval_and_survives_save_and_load(architecture: str, tmp_path: Path) -> None:
    model = build_tiny_target(architecture, vocab_size=300)
    assert type(model).__name__ == architecture
    assert not model.training
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert sum(p.numel() for p in model.parameters()) < 500_000
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    input_ids = torch.randint(3, 300, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids).logits, model(input_ids).logits)


@pytest.mark.parametrize("architecture", SUPPORTED_ARCHITECTURES)
def test_tiny_target_predicts_with_clear_winners(architecture: str) -> None:
    """A fresh model predicts almost uniformly; ours are sharpened to look like a trained LM."""
    model = build_tiny_target(architecture, vocab_size=300)
    # Inputs from their own generator: the global RNG's state depends on which tests ran
    # before in this pytest process, and on some draws Qwen2's mean top-1 dips below 0.25.
    input_ids = torch.randint(3, 300, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        probs = model(input_ids).logits.softmax(-1)
    # Uniform would be 1/300 ~ 0.003; across 20 input draws every architecture stays >= 0.27.
    assert probs.max(-1).values.mean() > 0.2


def test_same_seed_same_weights_and_the_global_rng_is_left_alone() -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    first = build_tiny_target("LlamaForCausalLM", vocab_size=300, seed=7)
    assert torch.equal(torch.rand(1), expected_next)
    second = build_tiny_target("LlamaForCausalLM", vocab_size=300, seed=7)
    other = build_tiny_target("LlamaForCausalLM", vocab_size=300, seed=8)
    assert torch.equal(first.lm_head.weight, second.lm_head.weight)
    assert not torch.equal(first.lm_head.weight, other.lm_head.weight)


def test_architecture_specific_features_are_present() -> None:
    moe = tiny_target_config("Qwen3MoeForCausalLM", vocab_size=300)
    assert moe.num_experts == 4
    assert moe.num_experts_per_tok == 2
    assert moe.mlp_only_layers == [0]
    gpt_oss = tiny_target_config("GptOssForCausalLM", vocab_size=300)
    assert set(gpt_oss.layer_types) == {"sliding_attention", "full_attention"}
    assert gpt_oss.sliding_window == 8
    assert gpt_oss.num_local_experts == 4
    for architecture in SUPPORTED_ARCHITECTURES:
        config = tiny_target_config(architecture, vocab_size=300)
        # Eight layers: EAGLE-3's default taps (2, N//2, N-3) are three distinct layers.
        assert config.num_hidden_layers == 8
        assert config.architectures == [architecture]


def test_unknown_architecture_and_tiny_vocabulary_are_rejected() -> None:
    with pytest.raises(UnsupportedArchitectureError, match=r"'MistralForCausalLM'.*LlamaForCausalLM"):
        tiny_target_config("MistralForCausalLM", vocab_size=300)
    with pytest.raises(ValueError, match="vocab_size must be at least 8"):
        tiny_target_config("LlamaForCausalLM", vocab_size=4)


def test_written_target_directory_has_a_chatml_tokenizer(tmp_path: Path) -> None:
    directory = write_tiny_target("Qwen2ForCausalLM", tmp_path / "qwen2")
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory)
    assert len(tokenizer) == TINY_VOCAB_SIZE == model.config.vocab_size
    messages = [{"role": "user", "content": "Hi é"}, {"role": "assistant", "content": "Hello."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    assert text == "<|im_start|>user\nHi é<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>") == 1
    assert tokenizer.decode(ids) == text
    assert model.generation_config.eos_token_id == 2
