"""transformers' SDPA attention, except that on a CPU a masked call reads the shared key/value
heads in place (SDPA's ``enable_gqa``) instead of repeating them.

transformers hands SDPA the grouped-query heads in place only without a mask: SmolLM2 has 9
query heads over 3 key/value heads, so every masked call (a verification of K+1 tokens after
the cache, a draft tree, a serving step's packed sequence) first copies each layer's whole
cache three times over (``repeat_kv``). On a CUDA GPU that copy is the price of SDPA's fast
kernels, which take no mask with GQA; a CPU's flash kernel takes both. Measured on a 2-core
AMD EPYC, 1 thread, SmolLM2-135M with the shipped head on the 20 chit-chat openers
(`eaglenest base-heads evaluate`): a K=3 verification fell from 1.22 to 1.10-1.12 decode steps
(docs/measurements.md).

Every other call is transformers' own, argument for argument: a single query (transformers
folds the grouped heads into it), a call without a mask (transformers passes ``enable_gqa``
itself), any call on another device, and position biases or soft-capping; so plain decoding
is the same computation as before.
``ensure_cpu_sdpa`` switches a model from "sdpa" to this, on a CPU only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

CPU_SDPA = "eaglenest_cpu_sdpa"


def cpu_sdpa_attention(  # noqa: PLR0917 - the attention interface's arguments
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The attention interface's function (see the module's note for when it differs)."""
    grouped = query.shape[1] != key.shape[1]
    special = kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None
    # One query: transformers folds the grouped heads into the query (``pack_gqa``), no copy.
    several = query.shape[2] > 1
    if query.device.type != "cpu" or attention_mask is None or not several or not grouped or special:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs
        )
    output = functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, enable_gqa=True
    )
    return output.transpose(1, 2).contiguous(), None


def ensure_cpu_sdpa(model: PreTrainedModel) -> bool:
    """Run ``model`` with ``cpu_sdpa_attention`` if it is on a CPU with transformers' SDPA
    attention; returns whether it does now. Other attention (eager for attention sinks, the
    engine's own) is left alone."""
    if model.device.type != "cpu":
        return False
    if model.config._attn_implementation == "sdpa":
        model.set_attn_implementation(CPU_SDPA)
    return bool(model.config._attn_implementation == CPU_SDPA)


AttentionInterface.register(CPU_SDPA, cpu_sdpa_attention)
# transformers builds masks by attention name: this one takes SDPA's.
ALL_MASK_ATTENTION_FUNCTIONS.register(CPU_SDPA, sdpa_mask)
