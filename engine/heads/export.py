"""Write a trained head in the native EAGLE-3 format, and load one back for a target."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import PreTrainedModel

from engine.capture import input_embedding_weight, output_head
from engine.heads import eagle2_format
from engine.heads.config import Eagle3HeadConfig
from engine.heads.eagle2_model import build_draft_model
from engine.heads.head_format import CONFIG_FILE, WEIGHTS_FILE, export_config, exported_head_tensors
from engine.heads.model import Eagle3DraftModel
from engine.heads.peagle import PEagleDraftModel, PEagleHeadConfig
from engine.heads.serving_settings import SpeculativeTokens, with_serving_settings
from engine.heads.validate import read_head_tensors, validate_head


def export_head(
    model: Eagle3DraftModel,
    out_dir: Path | str,
    *,
    dtype: torch.dtype = torch.float32,
    trained_speculative_tokens: int | None = None,
    verifier: str | None = None,
) -> Path:
    """Write ``config.json`` + ``model.safetensors`` into ``out_dir``, replacing what was there.

    The config carries the serving settings (engine.heads.serving_settings): K is the
    trained one, ``trained_speculative_tokens`` (TTT steps), until a benchmark recommends
    another; ``verifier`` names the target the head drafts for (its path or id).

    Written into a sibling temporary directory first and renamed, so a reader (or a
    crash) never sees half a head.
    """
    out_dir = Path(out_dir)
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    tensors = {
        name: tensor.to(dtype) if tensor.is_floating_point() else tensor
        for name, tensor in exported_head_tensors(model, model.config).items()
    }
    save_file(tensors, str(staging / WEIGHTS_FILE), metadata={"format": "pt"})
    if model.config.variant == "eagle2" and model.config.draft_vocab_size < model.config.vocab_size:
        eagle2_format.write_draft_vocab(staging, model.t2d)
    config = with_serving_settings(
        export_config(model.config, dtype=dtype),
        SpeculativeTokens(trained=trained_speculative_tokens),
        verifier_name_or_path=verifier,
    )
    (staging / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(staging, out_dir)
    return out_dir


# Where ``trainer train --out DIR`` exports its head: DIR/eagle_model.
RUN_HEAD_DIRNAME = "eagle_model"


def resolve_head_dir(path: Path) -> Path:
    """A head directory, given either the head itself or a training run's --out directory."""
    for candidate in (path, path / RUN_HEAD_DIRNAME):
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    raise ValueError(
        f"{path}: no EAGLE head here -- neither {path / CONFIG_FILE} nor "
        f"{path / RUN_HEAD_DIRNAME / CONFIG_FILE} (a training run's head) exists"
    )


def new_head(config: Eagle3HeadConfig) -> Eagle3DraftModel:
    """A freshly initialised head of ``config``'s variant (P-EAGLE, EAGLE-2 or EAGLE-3)."""
    if isinstance(config, PEagleHeadConfig):
        return PEagleDraftModel(config)
    return build_draft_model(config)


def load_head(head_dir: Path | str, target_model: PreTrainedModel) -> Eagle3DraftModel:
    """A validated head ready to draft for ``target_model``, in float32 on the CPU.

    Its embedding table is the target's own, as engines use it.
    """
    embeddings = input_embedding_weight(target_model)
    report = validate_head(head_dir, target_model.config, target_embeddings=embeddings)
    model = new_head(report.config)
    tensors = read_head_tensors(Path(head_dir))
    if report.config.variant == "eagle2":
        tensors = eagle2_format.internal_tensors(tensors)
    weights = {
        name: t.float() for name, t in tensors.items() if name not in ("d2t", "t2d") and "embed" not in name
    }
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # embed_tokens comes from the target below; d2t/t2d (and EAGLE-2's lm_head) are set explicitly.
    set_below = {"embed_tokens.weight", "d2t", "t2d"}
    if report.config.variant == "eagle2":
        set_below.add("lm_head.weight")
    missing = [name for name in missing if name not in set_below]
    if missing or unexpected:
        raise ValueError(
            f"{head_dir}: head tensors do not match the model (missing {missing}, unexpected {unexpected})"
        )
    t2d = tensors.get("t2d", report.draft_vocab_mask)
    d2t = tensors.get("d2t", eagle2_format.d2t_of(t2d))
    model.set_draft_vocab(d2t.long(), t2d.bool())
    # copy_ converts as it copies: `.float()` first would make a float32 copy of the whole table on
    # the target's device (2 GB for a 128k x 4,096 bf16 table on a GPU) only to copy it again.
    model.load_target_embeddings(embeddings)
    if report.config.variant == "eagle2":
        with torch.no_grad():
            model.lm_head.weight.copy_(output_head(target_model).weight.detach()[t2d.bool()].float())
    return model.eval()
