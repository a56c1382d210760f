"""Check an EAGLE-3 head directory against the target it will draft for.

Every problem that would make vLLM or SGLang refuse the head, or silently serve it on
the wrong features, is an ``InvalidHeadError`` naming the file, tensor or field: wrong
shapes, a draft vocabulary whose maps disagree, aux layers the target does not have,
or embeddings that are not the target's own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from transformers import PretrainedConfig

from engine.capture import check_aux_layer_ids
from engine.heads import eagle2_format
from engine.heads.config import AUX_LAYER_ID_CONVENTION, Eagle3HeadConfig, default_aux_layer_ids
from engine.heads.head_format import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    InvalidHeadError,
    expected_tensor_shapes,
    head_config_from_export,
)

_EMBED_NAMES = ("embed_tokens.weight", "model.embed_tokens.weight")


@dataclass(frozen=True)
class HeadReport:
    """What a valid head is, for logs and the job's lineage."""

    head_dir: str
    config: Eagle3HeadConfig
    num_parameters: int
    weight_dtype: str
    aux_layer_ids: list[int]
    aux_layer_id_convention: str
    draft_vocab_size: int
    has_embed_tokens: bool
    draft_vocab_mask: torch.Tensor  # t2d: the target ids the head drafts over
    warnings: list[str] = field(default_factory=list)


def read_head_config(head_dir: Path, target_config: PretrainedConfig | None = None) -> Eagle3HeadConfig:
    """The head's config; aux ids default to EAGLE-3's (2, N//2, N-3) of the target when absent."""
    path = Path(head_dir) / CONFIG_FILE
    if not path.is_file():
        raise InvalidHeadError(
            f"{path}: file not found (a head directory needs {CONFIG_FILE} and {WEIGHTS_FILE})"
        )
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidHeadError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(raw, dict):
        raise InvalidHeadError(f"{path}: must hold a JSON object")
    default_ids = num_layers = draft_vocab_size = None
    if target_config is not None:
        text = target_config.get_text_config()
        num_layers = int(text.num_hidden_layers)
        default_ids = default_aux_layer_ids(num_layers)
        t2d = _eagle2_draft_vocab(Path(head_dir), int(text.vocab_size))
        draft_vocab_size = None if t2d is None else int(t2d.sum())
    return head_config_from_export(
        raw,
        where=str(path),
        default_aux_layer_ids=default_ids,
        num_target_layers=num_layers,
        draft_vocab_size=draft_vocab_size,
    )


def _eagle2_draft_vocab(head_dir: Path, vocab_size: int) -> torch.Tensor | None:
    try:
        return eagle2_format.read_draft_vocab(head_dir, vocab_size)
    except ValueError as exc:
        raise InvalidHeadError(str(exc)) from exc


def read_head_tensors(head_dir: Path) -> dict[str, torch.Tensor]:
    path = Path(head_dir) / WEIGHTS_FILE
    if not path.is_file():
        raise InvalidHeadError(f"{path}: file not found")
    try:
        with safe_open(str(path), framework="pt") as handle:
            return {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
    except SafetensorError as exc:
        raise InvalidHeadError(f"{path}: not a readable safetensors file ({exc})") from exc


def _check_against_target(config: Eagle3HeadConfig, target_config: PretrainedConfig, where: str) -> None:
    text = target_config.get_text_config()
    pairs = (
        ("target_hidden_size", config.target_hidden_size, text.hidden_size),
        # Draft tokens are embedded with the target's table, so the widths must match.
        ("hidden_size", config.hidden_size, text.hidden_size),
        ("vocab_size", config.vocab_size, text.vocab_size),
    )
    for name, head_value, target_value in pairs:
        if head_value != target_value:
            raise InvalidHeadError(f"{where}: field {name!r} is {head_value}, the target's is {target_value}")
    try:
        check_aux_layer_ids(
            config.aux_layer_ids, int(text.num_hidden_layers), final=config.variant == "eagle2"
        )
    except ValueError as exc:
        raise InvalidHeadError(
            f"{where}: field 'eagle_config.eagle_aux_hidden_state_layer_ids': {exc}"
        ) from exc


def _check_tensor_shapes(config: Eagle3HeadConfig, tensors: dict[str, torch.Tensor], where: str) -> None:
    expected = expected_tensor_shapes(config)
    # Engines look every tensor name up in their module; an unknown one fails the load.
    unknown = sorted(set(tensors) - set(expected) - set(_EMBED_NAMES))
    if unknown:
        raise InvalidHeadError(f"{where}: unexpected tensor {unknown[0]!r} ({len(unknown)} unknown tensors)")
    for name, shape in expected.items():
        if name not in tensors:
            raise InvalidHeadError(f"{where}: missing tensor {name!r}")
        if tuple(tensors[name].shape) != shape:
            actual = tuple(tensors[name].shape)
            raise InvalidHeadError(f"{where}: tensor {name!r} has shape {actual}, config.json says {shape}")
        if name not in ("d2t", "t2d") and not torch.isfinite(tensors[name].float()).all():
            raise InvalidHeadError(f"{where}: tensor {name!r} contains NaN or infinite values")


def check_draft_vocab(d2t: torch.Tensor, t2d: torch.Tensor, *, where: str) -> None:
    """t2d marks exactly the draft vocabulary; draft id i maps onto the i-th marked target id."""
    if d2t.dtype not in (torch.int64, torch.int32):
        raise InvalidHeadError(f"{where}: tensor 'd2t' must be int64, got {d2t.dtype}")
    if t2d.dtype != torch.bool:
        raise InvalidHeadError(f"{where}: tensor 't2d' must be bool, got {t2d.dtype}")
    kept = torch.nonzero(t2d).flatten()
    if kept.numel() != d2t.numel():
        raise InvalidHeadError(
            f"{where}: tensor 't2d' marks {kept.numel()} target ids but draft_vocab_size is {d2t.numel()}"
        )
    mapped = torch.arange(d2t.numel()) + d2t.long()
    wrong = torch.nonzero(mapped != kept).flatten()
    if wrong.numel():
        first = int(wrong[0])
        raise InvalidHeadError(
            f"{where}: tensor 'd2t' maps draft id {first} to target id {int(mapped[first])}, "
            f"but the {first}-th id marked in 't2d' is {int(kept[first])} ({wrong.numel()} ids disagree)"
        )


def _check_embeddings(
    tensors: dict[str, torch.Tensor], target_embeddings: torch.Tensor | None, where: str
) -> tuple[bool, list[str]]:
    name = next((candidate for candidate in _EMBED_NAMES if candidate in tensors), None)
    if name is None:
        return False, []
    embed = tensors[name]
    if target_embeddings is None:
        return True, [f"tensor {name!r} is present but was not compared with the target's embeddings"]
    if tuple(embed.shape) != tuple(target_embeddings.shape):
        raise InvalidHeadError(
            f"{where}: tensor {name!r} has shape {tuple(embed.shape)}, the target's embeddings "
            f"{tuple(target_embeddings.shape)}; engines share the target's, so drop it"
        )
    # Compared where the target's table is (a GPU when the target runs there: load_head passes
    # it as it finds it), since allclose refuses tensors on two devices and the file's copy was
    # read onto the CPU. A half-precision copy of the target's table is still the target's table.
    shipped = embed.to(target_embeddings.device)
    if not torch.allclose(shipped.float(), target_embeddings.float(), rtol=1e-2, atol=1e-3):
        raise InvalidHeadError(
            f"{where}: tensor {name!r} differs from the target's token embeddings (random or from "
            "another model); engines share the target's, so drop it or export the target's"
        )
    return True, []


def validate_head(
    head_dir: Path | str, target_config: PretrainedConfig, *, target_embeddings: torch.Tensor | None = None
) -> HeadReport:
    """Check ``head_dir`` against the target; ``InvalidHeadError`` on the first problem.

    ``target_embeddings`` (the target's input embedding table) lets a head that ships
    ``embed_tokens`` be checked for being the target's own; without it that is a warning.
    """
    head_dir = Path(head_dir)
    config = read_head_config(head_dir, target_config)
    _check_against_target(config, target_config, str(head_dir / CONFIG_FILE))
    tensors = read_head_tensors(head_dir)
    where = str(head_dir / WEIGHTS_FILE)
    if config.variant == "eagle2":
        # Only the trained weights are in model.safetensors; the maps come from draft_vocab.json.
        t2d = _eagle2_draft_vocab(head_dir, config.vocab_size)
        if t2d is None:
            t2d = torch.ones(config.vocab_size, dtype=torch.bool)
        if "d2t" in tensors or "t2d" in tensors:
            raise InvalidHeadError(
                f"{where}: an EAGLE-2 head keeps d2t/t2d out of model.safetensors (vLLM fails on them)"
            )
        _check_tensor_shapes(config, tensors, where)
        tensors = {**tensors, "d2t": eagle2_format.d2t_of(t2d), "t2d": t2d}
    elif config.draft_vocab_size == config.vocab_size and "d2t" not in tensors and "t2d" not in tensors:
        # Full-vocabulary heads may omit the maps; they are the identity.
        tensors["d2t"] = torch.zeros(config.draft_vocab_size, dtype=torch.long)
        tensors["t2d"] = torch.ones(config.vocab_size, dtype=torch.bool)
    if config.variant == "eagle3":
        _check_tensor_shapes(config, tensors, where)
    check_draft_vocab(tensors["d2t"], tensors["t2d"], where=where)
    has_embed, warnings = _check_embeddings(tensors, target_embeddings, where)
    trained = [t for name, t in tensors.items() if name not in ("d2t", "t2d") and "embed_tokens" not in name]
    return HeadReport(
        head_dir=str(head_dir),
        config=config,
        num_parameters=sum(t.numel() for t in trained),
        weight_dtype=str(tensors["fc.weight"].dtype).removeprefix("torch."),
        aux_layer_ids=list(config.aux_layer_ids),
        aux_layer_id_convention=AUX_LAYER_ID_CONVENTION,
        draft_vocab_size=config.draft_vocab_size,
        has_embed_tokens=has_embed,
        draft_vocab_mask=tensors["t2d"],
        warnings=warnings,
    )
