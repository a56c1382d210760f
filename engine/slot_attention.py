"""Batched attention over a slot pool: one write and one attention call per layer, whatever
the number of rows.

The target runs over a right-padded batch ``[B, Q]``: Q = 1 for a decode step over every
slot, the longest joining prompt for a prefill. Each layer writes the batch's new keys and
values into the pool at their device-side positions, then attends with one
``scaled_dot_product_attention`` call over the pool's first ``key_length`` positions, under a
boolean mask that lets query ``q`` of row ``b`` see keys ``k <= position[b, q]`` (and, in a
sliding-window layer, ``k > position - window``). Grouped key/value heads are read in place,
never repeated (``engine.grouped_attention``: SDPA's GQA on a CPU, the query's groups folded
into its length on a GPU). The mask is built once per step, not per layer.

Unlike ``engine.packed_attention`` this is not bit-exact with batch-1 decoding: the
key length and the batch change the reduction order in the last bits. Callers that promise
exactness (serving and evaluation on CPU) keep the packed path; distillation and prompt
writing need the target's replies, not bit-equality, and take this one.
Models with attention sinks (GPT-OSS) run their own eager attention under the same mask, as
transformers serves them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import AttentionInterface

from engine.grouped_attention import fold_mask, folds_query_groups, grouped_attention
from engine.kv_pool import SlotKVPool

SLOT_ATTENTION = "eaglenest_slots"


@dataclass(frozen=True, slots=True)
class SlotStep:
    """Where one forward's new tokens go and what they see.

    ``rows`` [B, 1]: the slot of each batch row. ``write_positions`` [B, Q]: the position of
    each new token (the pool's scratch position for padding). ``masks`` maps a layer's
    sliding window (None: full attention) to its boolean mask [B, 1, Q, key_length].
    ``contiguous``: row b is slot b, so the pool is read as a view instead of gathered.
    ``folded_masks``: the masks folded for grouped queries (``engine.grouped_attention``),
    made by the step's first layer that needs one and read by the others."""

    pool: SlotKVPool
    rows: torch.Tensor
    write_positions: torch.Tensor
    key_length: int
    masks: dict[int | None, torch.Tensor]
    contiguous: bool
    folded_masks: dict[tuple[int | None, int], torch.Tensor] = field(default_factory=dict)

    def folded_mask(self, window: int | None, groups: int) -> torch.Tensor:
        """The mask of ``window``'s layers for queries folded ``groups`` times."""
        key = (window, groups)
        if key not in self.folded_masks:
            self.folded_masks[key] = fold_mask(self.masks[window], groups)
        return self.folded_masks[key]


def visible_keys(query_positions: torch.Tensor, key_length: int, window: int | None = None) -> torch.Tensor:
    """Boolean [B, 1, Q, key_length]: key ``k`` is visible to a query at position ``p`` when
    ``k <= p`` (and ``k > p - window`` in a sliding-window layer, as transformers masks it)."""
    keys = torch.arange(key_length, device=query_positions.device).view(1, 1, 1, key_length)
    positions = query_positions[:, None, :, None]
    allowed = keys <= positions
    if window is not None:
        allowed &= keys > positions - window
    return allowed


_STEP: ContextVar[SlotStep | None] = ContextVar("eaglenest_slot_step", default=None)


@contextmanager
def slot_step(step: SlotStep) -> Iterator[None]:
    """Within this block, forwards of a model using ``SLOT_ATTENTION`` read and write ``step``."""
    token = _STEP.set(step)
    try:
        yield
    finally:
        _STEP.reset(token)


def slot_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The attention interface's function: store the new keys, attend over the slot's keys."""
    del attention_mask  # the step's own masks replace transformers' (none is built for us)
    step = _STEP.get()
    if step is None:
        raise RuntimeError("slot attention runs only inside engine.slot_attention.slot_step")
    window = kwargs.pop("sliding_window", None)
    layer = int(getattr(module, "layer_idx"))  # noqa: B009 - set by every supported attention module
    key_pool, value_pool = step.pool.layer(layer, key)
    # Advanced indices on dims 0 and 2 around a slice put [B, Q] first: [B, Q, kv_heads, D].
    # The pool may hold a wider dtype than the target (fp32 on a CPU, engine.kv_pool): the new
    # keys and the query are converted, the output goes back to the target's dtype.
    key_pool[step.rows, :, step.write_positions] = key.transpose(1, 2).to(key_pool.dtype)
    value_pool[step.rows, :, step.write_positions] = value.transpose(1, 2).to(value_pool.dtype)
    if step.contiguous:
        batch = query.shape[0]
        keys, values = key_pool[:batch, :, : step.key_length], value_pool[:batch, :, : step.key_length]
    else:
        slots = step.rows[:, 0]
        keys, values = key_pool[slots, :, : step.key_length], value_pool[slots, :, : step.key_length]
    mask = step.masks[window]
    if kwargs.get("s_aux") is not None:
        output = eager_attention_with_sinks(module, query.to(keys.dtype), keys, values, mask, kwargs)
        return output.to(query.dtype), None
    fold = folds_query_groups(query.device)
    groups = query.shape[1] // keys.shape[1]
    folded = step.folded_mask(window, groups) if fold and groups > 1 else None
    output = grouped_attention(
        query.to(keys.dtype), keys, values, mask, kwargs.get("scaling"), folded_mask=folded, fold=fold
    )
    return output.transpose(1, 2).contiguous().to(query.dtype), None


def eager_attention_with_sinks(  # noqa: PLR0917 - the attention interface's arguments plus the mask
    module: nn.Module,
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    kwargs: dict[str, Any],
) -> torch.Tensor:
    """A model with attention sinks (GPT-OSS's per-head ``s_aux``) through its own modeling
    file's eager attention, with the additive mask that function expects."""
    function = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if function is None:
        raise ValueError(f"{type(module).__name__} has attention sinks but no eager attention to run them")
    float_mask = torch.zeros(mask.shape, dtype=query.dtype, device=query.device)
    float_mask.masked_fill_(~mask, torch.finfo(query.dtype).min)
    output: torch.Tensor = function(module, query, keys, values, float_mask, **kwargs)[0]
    return output


AttentionInterface.register(SLOT_ATTENTION, slot_attention)
