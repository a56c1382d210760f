"""Grouped-query attention under a boolean mask, in the layout each device's fast kernels take.

The slot pool's attention always has a mask (rows of different lengths, one call for the
batch) and, for most targets, fewer key/value heads than query heads (SmolLM2: 9 over 3).
SDPA's ``enable_gqa`` reads the shared heads in place, but on a CUDA GPU only its flash kernel
(which takes no mask) and its math fallback accept it: a masked GQA call runs the math
kernel, which first repeats each layer's whole key/value range ``heads / kv_heads`` times and
writes the full score matrix (transformers' ``use_gqa_in_sdpa`` notes the same fallback).

Folding the query's groups into its length avoids both: query head ``h`` reads key/value head
``h // groups``, so ``[B, heads, Q, D]`` viewed as ``[B, kv_heads, groups * Q, D]`` is an
ordinary attention over the key/value heads as they are, and the memory-efficient kernel
(which takes a mask but no GQA) runs it. The mask repeats along the folded length, once per
step. On a CPU, SDPA's flash kernel takes a mask and GQA together, and there the fold measured
no gain (2 cores, fp32: from 2x slower at one row and one query to 1.3x faster at 8 rows of 4
queries, level at 48-96 decode rows), so a CPU keeps ``enable_gqa``.
"""

from __future__ import annotations

import torch
from torch.nn import functional


def folds_query_groups(device: torch.device) -> bool:
    """Whether a masked grouped-query call on ``device`` folds the groups (see the module's note)."""
    return device.type != "cpu"


def fold_mask(mask: torch.Tensor, groups: int) -> torch.Tensor:
    """A boolean mask [B, 1, Q, K] for queries folded ``groups`` times: [B, 1, groups * Q, K],
    where folded query ``g * Q + q`` sees what query ``q`` sees."""
    return mask.repeat(1, 1, groups, 1)


def grouped_attention(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    scale: float | None,
    *,
    folded_mask: torch.Tensor | None = None,
    fold: bool | None = None,
) -> torch.Tensor:
    """``query`` [B, heads, Q, D] over ``keys``/``values`` [B, kv_heads, K, D] under the boolean
    ``mask`` [B, 1, Q, K] (True: visible): [B, heads, Q, D].

    ``folded_mask`` is ``fold_mask(mask, heads // kv_heads)`` when the caller keeps one for
    every layer of a step; ``fold`` overrides the device's choice (tests, the benchmark)."""
    heads, kv_heads = query.shape[1], keys.shape[1]
    if fold is None:
        fold = folds_query_groups(query.device)
    if not fold or heads == kv_heads:
        return functional.scaled_dot_product_attention(
            query, keys, values, attn_mask=mask, scale=scale, enable_gqa=True
        )
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads do not group over {kv_heads} key/value heads")
    groups = heads // kv_heads
    batch, _, length, dim = query.shape
    folded_query = query.reshape(batch, kv_heads, groups * length, dim)
    visible = fold_mask(mask, groups) if folded_mask is None else folded_mask
    output = functional.scaled_dot_product_attention(
        folded_query, keys, values, attn_mask=visible, scale=scale
    )
    # reshape, not view: CUDA's memory-efficient kernel writes [B, groups * Q, kv_heads, D] and
    # returns it transposed, so kv_heads and groups are not adjacent in memory and a view of
    # [B, heads, Q, D] is impossible (a CPU's SDPA returns a contiguous output, which hid this).
    return output.reshape(batch, heads, length, dim)
