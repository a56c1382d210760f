"""Tiny random target models of every supported architecture, for fast tests.

Each keeps what makes its architecture distinct (Qwen3's q/k norms, Qwen3-MoE's routed
experts next to a dense layer, GPT-OSS's alternating sliding/full attention, sinks and
biased experts, Qwen3-Next's linear-attention layers between full-attention ones) at a
width that trains in milliseconds on a CPU. ``write_tiny_target`` saves one with a
byte-level ChatML tokenizer, so a directory looks like a real target to everything that
loads one (training, the engine, the worker).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    GenerationConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

from engine.capture import SUPPORTED_ARCHITECTURES, UnsupportedArchitectureError

_MODEL_TYPES = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "GptOssForCausalLM": "gpt_oss",
    "Qwen3NextForCausalLM": "qwen3_next",
}

# Eight layers so EAGLE-3's default taps (2, N//2, N-3) are three distinct layers.
_COMMON: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}

_FINAL_NORM_SCALE = 20.0

_SPECIFIC: dict[str, dict[str, Any]] = {
    # Tied embeddings like SmolLM2, the Llama target we train on for real.
    "LlamaForCausalLM": {"tie_word_embeddings": True},
    "Qwen2ForCausalLM": {"tie_word_embeddings": False},
    "Qwen3ForCausalLM": {"tie_word_embeddings": True},
    "Qwen3MoeForCausalLM": {
        "tie_word_embeddings": False,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "mlp_only_layers": [0],  # one dense layer among the sparse ones, as some checkpoints have
    },
    # Hybrid like the released model: three linear-attention (gated delta rule) layers to
    # each full-attention one, every layer a routed MoE with a shared expert, partial RoPE.
    "Qwen3NextForCausalLM": {
        "tie_word_embeddings": False,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
    },
    "GptOssForCausalLM": {
        "tie_word_embeddings": False,
        "intermediate_size": 32,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        # Short window so test sequences actually exercise the sliding layers.
        "sliding_window": 8,
        "layer_types": ["sliding_attention", "full_attention"] * 4,
        # YaRN as the released checkpoints, with a factor consistent with the context length.
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 150000.0,
            "factor": 4.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 512,
        },
    },
}


def tiny_target_config(architecture: str, *, vocab_size: int) -> PretrainedConfig:
    """A tiny config of ``architecture`` (one of ``SUPPORTED_ARCHITECTURES``)."""
    if architecture not in _MODEL_TYPES:
        raise UnsupportedArchitectureError(
            f"no tiny config for architecture {architecture!r}; "
            f"supported architectures: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    if vocab_size < 8:
        raise ValueError(f"vocab_size must be at least 8 (special tokens use ids 0-2), got {vocab_size}")
    settings = {**_COMMON, **_SPECIFIC[architecture], "vocab_size": vocab_size}
    config = AutoConfig.for_model(_MODEL_TYPES[architecture], **settings)
    config.architectures = [architecture]
    return config


def build_tiny_target(architecture: str, *, vocab_size: int, seed: int = 0) -> PreTrainedModel:
    """A randomly initialised float32 model in eval mode; the same seed gives the same weights.

    The caller's global RNG is left untouched, so building a model never shifts the
    randomness of the test or training run around it.
    """
    config = tiny_target_config(architecture, vocab_size=vocab_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model: PreTrainedModel = AutoModelForCausalLM.from_config(config, dtype=torch.float32)  # type: ignore[no-untyped-call]
    # A freshly initialised model predicts almost uniformly (entropy ~ log V), unlike any
    # trained LM. Scaling the final norm sharpens its next-token distributions (top-1
    # probability ~0.4-0.7), so greedy decoding has clear winners and a draft head has a
    # learnable teacher.
    with torch.no_grad():
        model.model.norm.weight.fill_(_FINAL_NORM_SCALE)
    model.train(False)
    return model


# Ids 0-2 match the tiny configs' pad/bos/eos; every byte then has its own token.
TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TINY_VOCAB_SIZE = len(TINY_SPECIAL_TOKENS) + 256
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer (no merges: one token per byte) with SmolLM2's ChatML template."""
    byte_symbols = sorted(pre_tokenizers.ByteLevel.alphabet(), key=ord)
    vocab = {token: index for index, token in enumerate(TINY_SPECIAL_TOKENS)}
    vocab.update({symbol: len(TINY_SPECIAL_TOKENS) + index for index, symbol in enumerate(byte_symbols)})
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend,
        pad_token=TINY_SPECIAL_TOKENS[0],
        bos_token=TINY_SPECIAL_TOKENS[1],
        eos_token=TINY_SPECIAL_TOKENS[2],
        additional_special_tokens=list(TINY_SPECIAL_TOKENS),
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def write_tiny_target(architecture: str, out_dir: Path | str, *, seed: int = 0) -> Path:
    """Save a tiny ``architecture`` model with the byte-level ChatML tokenizer into ``out_dir``."""
    out_dir = Path(out_dir)
    model = build_tiny_target(architecture, vocab_size=TINY_VOCAB_SIZE, seed=seed)
    model.generation_config = GenerationConfig(  # type: ignore[no-untyped-call]
        bos_token_id=1, eos_token_id=2, pad_token_id=0
    )
    model.save_pretrained(out_dir)
    build_tiny_tokenizer().save_pretrained(out_dir)
    return out_dir
