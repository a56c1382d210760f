"""The serving settings an exported head's config.json carries (speculators-format keys)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoConfig, PreTrainedModel

from engine.capture import input_embedding_weight
from engine.heads.config import Eagle3HeadConfig
from engine.heads.export import export_head, load_head
from engine.heads.model import Eagle3DraftModel
from engine.heads.serving_settings import (
    DEFAULT_SPECULATIVE_TOKENS,
    SpeculativeTokens,
    recorded_speculative_tokens,
    served_speculative_tokens,
    with_serving_settings,
)
from trainer.models.tiny import build_tiny_target

VOCAB = 300


@pytest.fixture(scope="module")
def target() -> PreTrainedModel:
    return build_tiny_target("Qwen3ForCausalLM", vocab_size=VOCAB)


def _export(target: PreTrainedModel, out: Path, **kwargs: Any) -> dict[str, Any]:
    head = Eagle3DraftModel(Eagle3HeadConfig.from_target(target.config, draft_vocab_size=VOCAB))
    head.set_draft_vocab(torch.zeros(VOCAB, dtype=torch.long), torch.ones(VOCAB, dtype=torch.bool))
    head.load_target_embeddings(input_embedding_weight(target))
    config: dict[str, Any] = json.loads((export_head(head, out, **kwargs) / "config.json").read_text())
    return config


def _as_vllm_reads_it(config: dict[str, Any]) -> dict[str, Any]:
    """What vLLM takes from a speculators-format config when it is served as the model itself:
    it refuses the format without these keys, then serves the verifier with the first
    proposal method's K."""
    speculators = config["speculators_config"]
    assert isinstance(config["transformer_layer_config"], dict)
    assert config["speculators_model_type"] == "eagle3"
    return {
        "method": config["speculators_model_type"],
        "num_speculative_tokens": speculators["proposal_methods"][0]["speculative_tokens"],
        "model": speculators["verifier"]["name_or_path"],
    }


def test_the_export_records_the_trained_k_where_vllm_reads_it(
    target: PreTrainedModel, tmp_path: Path
) -> None:
    config = _export(target, tmp_path / "head", trained_speculative_tokens=5, verifier="/models/qwen3")
    assert _as_vllm_reads_it(config) == {
        "method": "eagle3",
        "num_speculative_tokens": 5,
        "model": "/models/qwen3",
    }
    assert served_speculative_tokens(config) == 5
    tokens = recorded_speculative_tokens(config)
    assert (tokens.trained, tokens.recommended) == (5, None)
    assert config["speculators_config"]["verifier"]["architectures"] == ["Qwen3ForCausalLM"]
    layer = config["transformer_layer_config"]
    assert layer["model_type"] == "llama"
    assert layer["num_hidden_layers"] == 1
    assert layer["hidden_size"] == config["hidden_size"]
    assert config["eaglenest"]["serve_with"]["sglang_flags"] == {
        "--speculative-algorithm": "EAGLE3",
        "--speculative-num-steps": 5,
        "--speculative-eagle-topk": 1,
        "--speculative-num-draft-tokens": 6,
    }
    assert config["eaglenest"]["serve_with"]["vllm_speculative_config"] == {
        "method": "eagle3",
        "num_speculative_tokens": 5,
    }


def test_the_keys_leave_the_native_format_loadable(target: PreTrainedModel, tmp_path: Path) -> None:
    _export(target, tmp_path / "head", trained_speculative_tokens=3, verifier="x")
    # Engines load the draft through its model_type (llama), not the speculators config class.
    loaded = AutoConfig.from_pretrained(tmp_path / "head")
    assert loaded.model_type == "llama"
    assert loaded.architectures == ["LlamaForCausalLMEagle3"]
    load_head(tmp_path / "head", target)


def test_an_untrained_head_gets_the_default_k(target: PreTrainedModel, tmp_path: Path) -> None:
    config = _export(target, tmp_path / "head")
    assert served_speculative_tokens(config) == DEFAULT_SPECULATIVE_TOKENS
    assert recorded_speculative_tokens(config).trained is None


def test_a_recommended_k_replaces_the_served_one_and_keeps_the_trained_one(
    target: PreTrainedModel, tmp_path: Path
) -> None:
    exported = _export(target, tmp_path / "head", trained_speculative_tokens=3, verifier="/local/model")
    tokens = SpeculativeTokens(
        trained=3, recommended=2, recommended_at_concurrency=1, by_concurrency={1: 2, 8: 4}
    )
    config = json.loads(
        json.dumps(with_serving_settings(exported, tokens, verifier_name_or_path="s3://m/model/"))
    )
    assert _as_vllm_reads_it(config) == {
        "method": "eagle3",
        "num_speculative_tokens": 2,
        "model": "s3://m/model/",
    }
    assert recorded_speculative_tokens(config) == tokens
    assert config["eaglenest"]["serve_with"]["sglang_flags"]["--speculative-num-draft-tokens"] == 3
    # Written again with the same settings: the same document (a redelivered publish).
    assert with_serving_settings(config, tokens, verifier_name_or_path="s3://m/model/") == config
    # Everything else is the export's own.
    for key in exported.keys() - {"eaglenest", "speculators_config"}:
        assert config[key] == exported[key], key


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"speculators_config": {"proposal_methods": []}},
        {"speculators_config": {"proposal_methods": [{}]}},
    ],
)
def test_a_config_without_a_k_is_a_clear_error(config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="speculative_tokens"):
        served_speculative_tokens(config)
