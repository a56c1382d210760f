"""The native EAGLE-3 head format on disk (SafeAILab / SpecForge / vLLM / SGLang).

A head directory holds ``config.json`` (a one-layer Llama config with
``architectures: ["LlamaForCausalLMEagle3"]`` plus the EAGLE fields) and
``model.safetensors`` with ``fc``, ``midlayer.*``, ``norm``, ``lm_head``, ``d2t``, ``t2d``.
This module converts between that format and ``Eagle3HeadConfig``; export, load and
validation all go through it so the three never disagree.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import ValidationError
from torch import nn

from engine.heads import eagle2_format
from engine.heads.config import (
    AUX_LAYER_ID_CONVENTION,
    DraftVariant,
    Eagle3HeadConfig,
    final_feature_layer_id,
)
from engine.heads.peagle import PEagleHeadConfig
from engine.heads.serving_settings import PEAGLE_ARCHITECTURE

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
HEAD_ARCHITECTURE = "LlamaForCausalLMEagle3"
# PEAGLE_ARCHITECTURE: vLLM 0.32 registers this name for an EAGLE-3 head trained for parallel
# drafting (P-EAGLE): the same tensors plus ``mask_hidden``, and ``mask_token_id`` in the config.
# Tensors the head owns that engines do not load as weights of a module: the frozen
# target embeddings (engines share the target's) and the rotary tables (recomputed).
_NOT_EXPORTED_PREFIXES = ("embed_tokens.", "rotary_emb.")


class InvalidHeadError(ValueError):
    """A head directory cannot be used with the target; the message names the file, tensor or field."""


def head_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """The tensors of a head as checkpoints save them: every weight plus d2t/t2d, no embeddings."""
    return {
        name: tensor.detach().contiguous().cpu()
        for name, tensor in model.state_dict().items()
        if not name.startswith(_NOT_EXPORTED_PREFIXES)
    }


def exported_head_tensors(model: nn.Module, config: Eagle3HeadConfig) -> dict[str, torch.Tensor]:
    """The tensors of an exported head: as checkpointed for EAGLE-3; for EAGLE-2, vLLM's
    names without the target's lm_head and the maps (draft_vocab.json holds those)."""
    tensors = head_tensors(model)
    return eagle2_format.exported_tensors(tensors) if config.variant == "eagle2" else tensors


def expected_tensor_shapes(config: Eagle3HeadConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor an exported head must contain, with its shape."""
    if config.variant == "eagle2":
        return eagle2_format.expected_tensor_shapes(config)
    hidden, heads, kv_heads = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
    attention_width = heads * config.head_dim
    kv_width = kv_heads * config.head_dim
    return {
        "fc.weight": (hidden, 3 * config.target_hidden_size),
        "midlayer.hidden_norm.weight": (hidden,),
        "midlayer.input_layernorm.weight": (hidden,),
        "midlayer.self_attn.q_proj.weight": (attention_width, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": (kv_width, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": (kv_width, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": (hidden, attention_width),
        "midlayer.post_attention_layernorm.weight": (hidden,),
        "midlayer.mlp.gate_proj.weight": (config.intermediate_size, hidden),
        "midlayer.mlp.up_proj.weight": (config.intermediate_size, hidden),
        "midlayer.mlp.down_proj.weight": (hidden, config.intermediate_size),
        "norm.weight": (hidden,),
        "lm_head.weight": (config.draft_vocab_size, hidden),
        "d2t": (config.draft_vocab_size,),
        "t2d": (config.vocab_size,),
        **(
            {"mask_hidden": (1, 1, 3 * config.target_hidden_size)}
            if isinstance(config, PEagleHeadConfig)
            else {}
        ),
    }


def draft_variant(config: Eagle3HeadConfig) -> DraftVariant:
    """What EAGLE_VARIANT calls this head: ``peagle`` for a parallel-drafting head (an EAGLE-3
    head with mask slots), else its family, ``eagle3`` or ``eagle2``."""
    return "peagle" if isinstance(config, PEagleHeadConfig) else config.variant


def _legacy_rope_fields(rope: dict[str, Any]) -> dict[str, Any]:
    """``rope_theta`` / ``rope_scaling`` as engines pinned to transformers 4.x read them."""
    theta = rope.get("rope_theta", 10000.0)
    scaling = {key: value for key, value in rope.items() if key != "rope_theta"}
    if scaling.get("rope_type", "default") == "default":
        return {"rope_theta": theta, "rope_scaling": None}
    return {"rope_theta": theta, "rope_scaling": scaling}


def _llama_fields(config: Eagle3HeadConfig, dtype: torch.dtype) -> dict[str, Any]:
    """The one-layer Llama config every variant's engines build their decoder layer from."""
    return {
        "model_type": "llama",
        "num_hidden_layers": 1,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": config.head_dim,
        "hidden_act": config.hidden_act,
        "rms_norm_eps": config.rms_norm_eps,
        "max_position_embeddings": config.max_position_embeddings,
        **_legacy_rope_fields(config.rope_parameters),
        "rope_parameters": dict(config.rope_parameters),
        "attention_bias": False,
        "mlp_bias": False,
        "vocab_size": config.vocab_size,
        "tie_word_embeddings": False,
        "torch_dtype": str(dtype).removeprefix("torch."),
    }


def export_config(config: Eagle3HeadConfig, *, dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """The ``config.json`` of an exported head."""
    if config.variant == "eagle2":
        return eagle2_format.export_config(config, _llama_fields(config, dtype))
    parallel = isinstance(config, PEagleHeadConfig)
    mask_fields: dict[str, int] = {}
    if isinstance(config, PEagleHeadConfig):
        # vLLM reads mask_token_id (pard_token is the older name of the same field).
        mask_fields = {"mask_token_id": config.mask_token_id, "pard_token": config.mask_token_id}
    return {
        "architectures": [PEAGLE_ARCHITECTURE if parallel else HEAD_ARCHITECTURE],
        **_llama_fields(config, dtype),
        "draft_vocab_size": config.draft_vocab_size,
        "target_hidden_size": config.target_hidden_size,
        **mask_fields,
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": list(config.aux_layer_ids),
            "use_aux_hidden_state": True,
            # Not read by engines; says how to read the ids above (vLLM's convention).
            "aux_layer_id_convention": AUX_LAYER_ID_CONVENTION,
        },
        "eaglenest": {
            "aux_layer_id_convention": (
                "input_of_layer: id i is the hidden state entering target decoder layer i "
                "(transformers' output_hidden_states[i]); vLLM reads ids this way, SGLang "
                "reads them as outputs of layer i and adds 1"
            ),
            "target_architecture": config.target_architecture,
            "draft_variant": draft_variant(config),
        },
    }


def _required(raw: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in raw:
        raise InvalidHeadError(f"{where}: missing field {key!r}")
    value = raw[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidHeadError(f"{where}: field {key!r} must be {kind.__name__}, got {value!r}")
    return value


def _rope_from_raw(raw: dict[str, Any]) -> dict[str, Any]:
    rope = raw.get("rope_parameters")
    if isinstance(rope, dict):
        return dict(rope)
    rope = dict(raw.get("rope_scaling") or {"rope_type": "default"})
    if "type" in rope and "rope_type" not in rope:
        rope["rope_type"] = rope.pop("type")
    rope["rope_theta"] = float(raw.get("rope_theta", 10000.0))
    return rope


def head_config_from_export(
    raw: dict[str, Any],
    *,
    where: str,
    default_aux_layer_ids: list[int] | None = None,
    num_target_layers: int | None = None,
    draft_vocab_size: int | None = None,
) -> Eagle3HeadConfig:
    """Parse a native ``config.json``; ``InvalidHeadError`` names the offending field.

    Heads written by other tools may leave out ``head_dim``, ``target_hidden_size``,
    ``draft_vocab_size`` or the aux layer ids; each has the default engines assume.
    An EAGLE-2 head reads the target's last feature (id ``num_target_layers``) and drafts
    over ``draft_vocab_size`` tokens (its draft_vocab.json; the full vocabulary without one).
    """
    architectures = raw.get("architectures")
    parallel = architectures == [PEAGLE_ARCHITECTURE]
    variant = "eagle2" if architectures == [eagle2_format.HEAD_ARCHITECTURE_EAGLE2] else "eagle3"
    if variant == "eagle3" and architectures not in ([HEAD_ARCHITECTURE], [PEAGLE_ARCHITECTURE]):
        raise InvalidHeadError(
            f"{where}: field 'architectures' must be [{HEAD_ARCHITECTURE!r}] (native EAGLE-3 format), "
            f"[{eagle2_format.HEAD_ARCHITECTURE_EAGLE2!r}] (EAGLE-2, vLLM method 'eagle') or "
            f"[{PEAGLE_ARCHITECTURE!r}] (P-EAGLE), got {architectures!r}"
        )
    layers = raw.get("num_hidden_layers", 1)
    if layers != 1:
        raise InvalidHeadError(
            f"{where}: field 'num_hidden_layers' must be 1 for an EAGLE-3 head, got {layers!r}"
        )
    hidden = _required(raw, "hidden_size", int, where)
    heads = _required(raw, "num_attention_heads", int, where)
    vocab = _required(raw, "vocab_size", int, where)
    eagle = raw.get("eagle_config") or {}
    if not isinstance(eagle, dict):
        raise InvalidHeadError(f"{where}: field 'eagle_config' must be an object, got {eagle!r}")
    if variant == "eagle3" and eagle.get("use_aux_hidden_state", True) is not True:
        raise InvalidHeadError(f"{where}: field 'eagle_config.use_aux_hidden_state' must be true for EAGLE-3")
    eaglenest = raw.get("eaglenest") or {}
    aux_ids: list[int] | None
    if variant == "eagle2":
        if num_target_layers is None:
            raise InvalidHeadError(f"{where}: an EAGLE-2 head is read against its target's config")
        aux_ids = [final_feature_layer_id(num_target_layers)]
    else:
        aux_ids = eagle.get("eagle_aux_hidden_state_layer_ids", default_aux_layer_ids)
    if aux_ids is None:
        raise InvalidHeadError(f"{where}: missing field 'eagle_config.eagle_aux_hidden_state_layer_ids'")
    extra: dict[str, Any] = {}
    if parallel:
        mask_token = raw.get("mask_token_id", raw.get("pard_token"))
        if mask_token is None:
            raise InvalidHeadError(f"{where}: missing field 'mask_token_id' (a P-EAGLE head's mask token)")
        extra["mask_token_id"] = mask_token
    config_class = PEagleHeadConfig if parallel else Eagle3HeadConfig
    try:
        return config_class(
            variant=variant,
            hidden_size=hidden,
            target_hidden_size=raw.get("target_hidden_size", hidden),
            intermediate_size=_required(raw, "intermediate_size", int, where),
            num_attention_heads=heads,
            num_key_value_heads=raw.get("num_key_value_heads", heads),
            head_dim=raw.get("head_dim") or hidden // heads,
            rms_norm_eps=_required(raw, "rms_norm_eps", float, where),
            rope_parameters=_rope_from_raw(raw),
            max_position_embeddings=raw.get("max_position_embeddings", 2048),
            vocab_size=vocab,
            draft_vocab_size=draft_vocab_size or raw.get("draft_vocab_size") or vocab,
            aux_layer_ids=aux_ids,
            hidden_act=raw.get("hidden_act", "silu"),
            target_architecture=eaglenest.get("target_architecture", "")
            if isinstance(eaglenest, dict)
            else "",
            **extra,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"field {'.'.join(str(part) for part in error['loc']) or 'config'}: {error['msg']}"
            for error in exc.errors()
        )
        raise InvalidHeadError(f"{where}: {problems}") from exc
