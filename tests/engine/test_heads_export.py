"""Native EAGLE-3 export, load_head round trip, and validate_head's errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedModel

from engine.capture import input_embedding_weight
from engine.heads.config import Eagle3HeadConfig
from engine.heads.export import RUN_HEAD_DIRNAME, export_head, load_head, resolve_head_dir
from engine.heads.head_format import InvalidHeadError
from engine.heads.model import DraftKVCache, Eagle3DraftModel
from engine.heads.validate import validate_head
from trainer.models.tiny import build_tiny_target

VOCAB = 300
DRAFT_VOCAB = 40


@pytest.fixture(scope="module")
def target() -> PreTrainedModel:
    return build_tiny_target("Qwen3ForCausalLM", vocab_size=VOCAB)


def trained_looking_head(target: PreTrainedModel) -> Eagle3DraftModel:
    """A head with random (not default) weights and a scattered draft vocabulary."""
    torch.manual_seed(0)
    head = Eagle3DraftModel(Eagle3HeadConfig.from_target(target.config, draft_vocab_size=DRAFT_VOCAB))
    with torch.no_grad():
        for parameter in head.parameters():
            if parameter.requires_grad:
                parameter.normal_(0, 0.1)
    kept = torch.randperm(VOCAB)[:DRAFT_VOCAB].sort().values
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[kept] = True
    head.set_draft_vocab(kept - torch.arange(DRAFT_VOCAB), t2d)
    head.load_target_embeddings(input_embedding_weight(target))
    return head


@pytest.fixture
def head_dir(target: PreTrainedModel, tmp_path: Path) -> Path:
    return export_head(trained_looking_head(target), tmp_path / "head")


def test_export_writes_the_native_format(head_dir: Path, target: PreTrainedModel) -> None:
    config = json.loads((head_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["model_type"] == "llama"
    assert config["num_hidden_layers"] == 1
    assert config["tie_word_embeddings"] is False
    assert config["vocab_size"] == VOCAB
    assert config["draft_vocab_size"] == DRAFT_VOCAB
    assert config["target_hidden_size"] == config["hidden_size"] == target.config.hidden_size
    assert config["head_dim"] == 16
    assert config["num_key_value_heads"] == 2
    assert config["rope_theta"] == target.config.rope_parameters["rope_theta"]
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert config["eagle_config"]["use_aux_hidden_state"] is True
    assert config["eagle_config"]["aux_layer_id_convention"] == "input_of_layer"
    tensors = load_file(str(head_dir / "model.safetensors"))
    assert not any("embed" in name for name in tensors)
    assert tensors["d2t"].dtype == torch.int64
    assert tensors["t2d"].dtype == torch.bool
    assert tensors["fc.weight"].shape == (64, 3 * 64)
    assert tensors["midlayer.self_attn.q_proj.weight"].shape == (64, 128)
    assert tensors["lm_head.weight"].shape == (DRAFT_VOCAB, 64)
    assert not (head_dir.parent / "head.partial").exists()


def test_load_head_round_trip_drafts_identically(head_dir: Path, target: PreTrainedModel) -> None:
    original = trained_looking_head(target).eval()
    loaded = load_head(head_dir, target)
    assert torch.equal(loaded.d2t, original.d2t)
    assert torch.equal(loaded.t2d, original.t2d)
    assert torch.equal(loaded.embed_tokens.weight, input_embedding_weight(target))
    hidden = torch.randn(1, 6, 3 * 64)
    ids = torch.randint(0, VOCAB, (1, 6))
    positions = torch.arange(6)[None]
    with torch.no_grad():
        expected = original.compute_logits(original(ids, original.fuse(hidden), positions, DraftKVCache()))
        actual = loaded.compute_logits(loaded(ids, loaded.fuse(hidden), positions, DraftKVCache()))
    torch.testing.assert_close(actual, expected)


def test_bfloat16_export_loads_as_float32(target: PreTrainedModel, tmp_path: Path) -> None:
    directory = export_head(trained_looking_head(target), tmp_path / "bf16", dtype=torch.bfloat16)
    assert json.loads((directory / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert load_file(str(directory / "model.safetensors"))["fc.weight"].dtype == torch.bfloat16
    report = validate_head(directory, target.config)
    assert report.weight_dtype == "bfloat16"
    assert load_head(directory, target).fc.weight.dtype == torch.float32


def test_valid_head_report(head_dir: Path, target: PreTrainedModel) -> None:
    report = validate_head(head_dir, target.config)
    assert report.aux_layer_ids == [2, 4, 5]
    assert report.aux_layer_id_convention == "input_of_layer"
    assert report.draft_vocab_size == DRAFT_VOCAB
    assert not report.has_embed_tokens
    assert report.warnings == []
    assert report.num_parameters == sum(
        p.numel() for p in trained_looking_head(target).parameters() if p.requires_grad
    )


def _edit_tensors(head_dir: Path, edit: Callable[[dict[str, torch.Tensor]], object]) -> None:
    tensors = load_file(str(head_dir / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(head_dir / "model.safetensors"))


def _edit_config(head_dir: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    config = json.loads((head_dir / "config.json").read_text())
    edit(config)
    (head_dir / "config.json").write_text(json.dumps(config))


def _swap_two_d2t_entries(tensors: dict[str, torch.Tensor]) -> None:
    d2t = tensors["d2t"].clone()
    d2t[[3, 4]] = d2t[[4, 3]] + torch.tensor([1, -1])
    tensors["d2t"] = d2t


def _mark_one_more_t2d(tensors: dict[str, torch.Tensor]) -> None:
    t2d = tensors["t2d"].clone()
    t2d[torch.nonzero(~t2d)[0]] = True
    tensors["t2d"] = t2d


TENSOR_PROBLEMS: list[tuple[str, Callable[[dict[str, torch.Tensor]], object], str]] = [
    ("missing fc", lambda t: t.pop("fc.weight"), r"missing tensor 'fc.weight'"),
    ("missing t2d", lambda t: t.pop("t2d"), r"missing tensor 't2d'"),
    (
        "wrong q_proj shape",
        lambda t: t.update({"midlayer.self_attn.q_proj.weight": torch.zeros(64, 64)}),
        r"tensor 'midlayer.self_attn.q_proj.weight' has shape \(64, 64\), config.json says \(64, 128\)",
    ),
    (
        "lm_head rows differ from draft vocab",
        lambda t: t.update({"lm_head.weight": torch.zeros(DRAFT_VOCAB + 1, 64)}),
        r"tensor 'lm_head.weight' has shape \(41, 64\)",
    ),
    ("NaN weights", lambda t: t["norm.weight"].fill_(float("nan")), r"tensor 'norm.weight' contains NaN"),
    ("d2t as float", lambda t: t.update({"d2t": t["d2t"].float()}), r"tensor 'd2t' must be int64"),
    ("t2d as int", lambda t: t.update({"t2d": t["t2d"].long()}), r"tensor 't2d' must be bool"),
    ("d2t maps out of order", _swap_two_d2t_entries, r"tensor 'd2t' maps draft id 3 to target id"),
    (
        "t2d marks too many",
        _mark_one_more_t2d,
        r"tensor 't2d' marks 41 target ids but draft_vocab_size is 40",
    ),
    (
        "unknown tensor",
        lambda t: t.update({"layers.0.mlp.up_proj.weight": torch.zeros(1)}),
        r"unexpected tensor 'layers.0.mlp.up_proj.weight'",
    ),
    (
        "random embeddings",
        lambda t: t.update({"embed_tokens.weight": torch.randn(VOCAB, 64)}),
        r"tensor 'embed_tokens.weight' differs from the target's token embeddings",
    ),
]


@pytest.mark.parametrize(
    ("edit", "message"), [p[1:] for p in TENSOR_PROBLEMS], ids=[p[0] for p in TENSOR_PROBLEMS]
)
def test_bad_tensors_are_named(
    head_dir: Path, target: PreTrainedModel, edit: Callable[[dict[str, torch.Tensor]], object], message: str
) -> None:
    _edit_tensors(head_dir, edit)
    embeddings = input_embedding_weight(target)
    with pytest.raises(InvalidHeadError, match=message) as error:
        validate_head(head_dir, target.config, target_embeddings=embeddings)
    assert "model.safetensors" in str(error.value)


CONFIG_PROBLEMS: list[tuple[str, Callable[[dict[str, Any]], object], str]] = [
    (
        "speculators format",
        lambda c: c.update({"architectures": ["Eagle3Speculator"]}),
        r"field 'architectures' must be \['LlamaForCausalLMEagle3'\]",
    ),
    ("two layers", lambda c: c.update({"num_hidden_layers": 2}), r"field 'num_hidden_layers' must be 1"),
    ("no hidden size", lambda c: c.pop("hidden_size"), r"missing field 'hidden_size'"),
    ("hidden size as text", lambda c: c.update({"hidden_size": "64"}), r"field 'hidden_size' must be int"),
    ("target width", lambda c: c.update({"target_hidden_size": 128}), r"field 'target_hidden_size' is 128"),
    (
        "vocabulary",
        lambda c: c.update({"vocab_size": 512}),
        r"field 'vocab_size' is 512, the target's is 300",
    ),
    (
        "aux layer past the target",
        lambda c: c["eagle_config"].update({"eagle_aux_hidden_state_layer_ids": [2, 4, 8]}),
        r"field 'eagle_config.eagle_aux_hidden_state_layer_ids'.*\[8\] are out of range",
    ),
    (
        "two aux layers",
        lambda c: c["eagle_config"].update({"eagle_aux_hidden_state_layer_ids": [2, 4]}),
        r"aux_layer_ids must name 3 target layer\(s\) for eagle3",
    ),
    (
        "no aux features",
        lambda c: c["eagle_config"].update({"use_aux_hidden_state": False}),
        r"use_aux_hidden_state' must be true",
    ),
]


@pytest.mark.parametrize(
    ("edit", "message"), [p[1:] for p in CONFIG_PROBLEMS], ids=[p[0] for p in CONFIG_PROBLEMS]
)
def test_bad_config_fields_are_named(
    head_dir: Path, target: PreTrainedModel, edit: Callable[[dict[str, Any]], object], message: str
) -> None:
    _edit_config(head_dir, edit)
    with pytest.raises(InvalidHeadError, match=message) as error:
        validate_head(head_dir, target.config)
    assert "config.json" in str(error.value)


def test_missing_files_and_bad_json_are_reported(head_dir: Path, target: PreTrainedModel) -> None:
    (head_dir / "model.safetensors").unlink()
    with pytest.raises(InvalidHeadError, match=r"model.safetensors: file not found"):
        validate_head(head_dir, target.config)
    (head_dir / "config.json").write_text('{"architectures": [\n')
    with pytest.raises(InvalidHeadError, match=r"config.json: not valid JSON \(line 2"):
        validate_head(head_dir, target.config)
    with pytest.raises(InvalidHeadError, match=r"config.json: file not found"):
        validate_head(head_dir / "nowhere", target.config)


def test_the_targets_own_embeddings_are_accepted(head_dir: Path, target: PreTrainedModel) -> None:
    embeddings = input_embedding_weight(target)
    _edit_tensors(head_dir, lambda t: t.update({"embed_tokens.weight": embeddings.to(torch.bfloat16)}))
    report = validate_head(head_dir, target.config, target_embeddings=embeddings)
    assert report.has_embed_tokens
    assert report.warnings == []
    unchecked = validate_head(head_dir, target.config)
    assert "not compared" in unchecked.warnings[0]
    assert torch.equal(load_head(head_dir, target).embed_tokens.weight, embeddings)


def test_shipped_embeddings_are_compared_on_the_targets_device(
    head_dir: Path, target: PreTrainedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_head hands over the target's table where the target runs, on a GPU the GPU, while the
    head file's copy is read onto the CPU; torch.allclose refuses two devices. The meta device
    stands in for the GPU, and a stand-in allclose that refuses two devices as torch's does
    records the call (meta tensors hold no values to compare)."""
    embeddings = input_embedding_weight(target)
    _edit_tensors(head_dir, lambda t: t.update({"embed_tokens.weight": embeddings.to(torch.bfloat16)}))
    compared: list[tuple[torch.device, torch.device]] = []

    def allclose(first: torch.Tensor, second: torch.Tensor, **_: float) -> bool:
        compared.append((first.device, second.device))
        if first.device != second.device:
            raise RuntimeError("Expected all tensors to be on the same device")
        return True

    monkeypatch.setattr(torch, "allclose", allclose)
    report = validate_head(head_dir, target.config, target_embeddings=embeddings.to("meta"))
    assert report.has_embed_tokens
    assert compared == [(torch.device("meta"), torch.device("meta"))]


def test_heads_from_other_tools_get_engine_defaults(head_dir: Path, target: PreTrainedModel) -> None:
    """SafeAILab-style configs leave out head_dim, target_hidden_size and the aux ids."""

    def strip(config: dict[str, Any]) -> None:
        for key in ("head_dim", "target_hidden_size", "rope_parameters", "eaglenest"):
            config.pop(key)
        config.pop("eagle_config")

    _edit_config(head_dir, strip)
    report = validate_head(head_dir, target.config)
    assert report.config.head_dim == 16
    assert report.config.target_hidden_size == 64
    assert report.aux_layer_ids == [2, 4, 5]  # EAGLE-3's default for an 8-layer target
    assert report.config.rope_parameters["rope_theta"] == target.config.rope_parameters["rope_theta"]


def test_full_vocabulary_head_may_omit_the_maps(target: PreTrainedModel, tmp_path: Path) -> None:
    head = Eagle3DraftModel(Eagle3HeadConfig.from_target(target.config, draft_vocab_size=VOCAB))
    directory = export_head(head, tmp_path / "full")
    _edit_tensors(directory, lambda t: [t.pop("d2t"), t.pop("t2d")])
    assert validate_head(directory, target.config).draft_vocab_size == VOCAB
    loaded = load_head(directory, target)
    assert bool(loaded.t2d.all())
    assert not bool(loaded.d2t.any())


def test_a_training_runs_out_directory_resolves_to_its_head(tmp_path: Path) -> None:
    head = tmp_path / "run" / RUN_HEAD_DIRNAME
    head.mkdir(parents=True)
    (head / "config.json").write_text("{}")
    assert resolve_head_dir(tmp_path / "run") == head  # what `trainer train --out run` wrote
    assert resolve_head_dir(head) == head  # the head itself
    with pytest.raises(ValueError, match="no EAGLE head here") as caught:
        resolve_head_dir(tmp_path)
    assert str(tmp_path / "config.json") in str(caught.value)
    assert str(tmp_path / RUN_HEAD_DIRNAME / "config.json") in str(caught.value)
