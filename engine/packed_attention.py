"""Attention over a packed batch: every sequence's new tokens in one row, each with its own cache.

The serving engine runs the target once per step over ``[1, sum(n_i)]`` tokens: the new
tokens of every sequence laid end to end (a prompt, a pending token, or a pending token
plus K drafts). Everything in a decoder layer but attention works row by row, so packing
is free for it; attention is done here, sequence by sequence, against that sequence's
own keys and values.

Why packing rather than a right-padded batch: the serving engine's greedy output must be
the target's plain greedy output token for token. With the oneDNN-packed linears
(``engine.packed_linear``) each row's projection is bit-for-bit the same whatever
the number of rows, and here each sequence's attention is the very call batch-1 decoding
makes (``engine.cpu_sdpa``'s SDPA call with the same shapes and the same mask), so each
sequence's logits are bit-for-bit those of decoding it alone. A padded batch changes the
key length and the mask of every row, and SDPA then differs in the last bits, which is
enough to flip a near-tie argmax a few hundred tokens in.

Sliding-window layers (GPT-OSS alternates them with full ones) attend to the keys of their
window only, exactly the keys transformers' sliding-window cache would still hold, under
the same mask; a model with attention sinks (GPT-OSS's learned per-head ``s_aux``, which
transformers serves with eager attention) runs its own modeling file's eager attention with
the additive mask transformers builds for it. Each layer's cache still keeps every position
(a rejected draft is cropped the same way for every layer).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import AttentionInterface

from engine.cpu_sdpa import cpu_sdpa_attention
from engine.slot_attention import eager_attention_with_sinks
from engine.slot_attention import visible_keys as slot_visible_keys

PACKED_ATTENTION = "eaglenest_packed"


class SequenceKV:
    """One sequence's target keys/values, per decoder layer [1, kv_heads, L, D].

    With ``capacity`` (the most positions the sequence will hold, when known up front) each
    layer's buffer is allocated once and filled in place; without it each append
    concatenates, which copies the whole cache at every step.
    """

    def __init__(self, num_layers: int, capacity: int | None = None) -> None:
        self._keys: list[torch.Tensor | None] = [None] * num_layers
        self._values: list[torch.Tensor | None] = [None] * num_layers
        self._lengths = [0] * num_layers
        self._capacity = capacity

    @property
    def length(self) -> int:
        """Positions held (every layer holds the same after a forward)."""
        return self._lengths[0]

    def layer_length(self, layer: int) -> int:
        return self._lengths[layer]

    def append(
        self, layer: int, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        old_keys, old_values = self._keys[layer], self._values[layer]
        start, stop = self._lengths[layer], self._lengths[layer] + keys.shape[2]
        if self._capacity is not None:
            if stop > self._capacity:
                raise ValueError(f"a cache of capacity {self._capacity} cannot hold {stop} positions")
            if old_keys is None or old_values is None:
                shape = (*keys.shape[:2], self._capacity, keys.shape[3])
                old_keys, old_values = keys.new_empty(shape), values.new_empty(shape)
                self._keys[layer], self._values[layer] = old_keys, old_values
            old_keys[:, :, start:stop] = keys
            old_values[:, :, start:stop] = values
            self._lengths[layer] = stop
            return old_keys[:, :, :stop], old_values[:, :, :stop]
        if old_keys is None or old_values is None:
            # A copy, not a view: a view would keep the whole packed step's tensor alive.
            new_keys, new_values = keys.clone(), values.clone()
        else:
            new_keys, new_values = torch.cat([old_keys, keys], dim=2), torch.cat([old_values, values], dim=2)
        self._keys[layer], self._values[layer] = new_keys, new_values
        self._lengths[layer] = stop
        return new_keys, new_values

    def extend_from(self, other: SequenceKV) -> None:
        """Append every position ``other`` holds (a shared prefix computed once)."""
        for layer in range(len(self._keys)):
            keys, values = other._keys[layer], other._values[layer]
            if keys is not None and values is not None:
                length = other._lengths[layer]
                self.append(layer, keys[:, :, :length], values[:, :, :length])

    def crop(self, length: int) -> None:
        """Forget positions from ``length`` on (rejected drafts)."""
        if length < 0:
            raise ValueError(f"cannot crop a cache to a negative length ({length})")
        for layer, (keys, values) in enumerate(zip(self._keys, self._values, strict=True)):
            self._lengths[layer] = min(self._lengths[layer], length)
            if self._capacity is None and keys is not None and values is not None:
                self._keys[layer] = keys[:, :, :length]
                self._values[layer] = values[:, :, :length]


@dataclass(frozen=True, slots=True)
class PackedLayout:
    """Which slice of the packed row belongs to which sequence: ``lengths[i]`` new tokens
    of the sequence whose cache is ``caches[i]``, in order."""

    caches: Sequence[SequenceKV]
    lengths: Sequence[int]


_LAYOUT: ContextVar[PackedLayout | None] = ContextVar("eaglenest_packed_layout", default=None)


@contextmanager
def packed_layout(layout: PackedLayout) -> Iterator[None]:
    """Within this block, forwards of a model using ``PACKED_ATTENTION`` read ``layout``."""
    token = _LAYOUT.set(layout)
    try:
        yield
    finally:
        _LAYOUT.reset(token)


def causal_mask_after(
    past: int, new: int, device: torch.device, *, window: int | None = None, first: int = 0
) -> torch.Tensor | None:
    """The mask batch-1 decoding gives SDPA for ``new`` queries after ``past`` cached
    positions, over the keys from position ``first`` on: none when a causal mask would
    mask nothing beyond ``is_causal`` (a single query, or an empty cache and a window no
    shorter than the prompt; SDPA then runs unmasked or ``is_causal``), else
    ``visible_keys``."""
    if new == 1 or (past == 0 and (window is None or new < window)):
        return None
    return visible_keys(past, new, device, window=window, first=first)


def visible_keys(
    past: int, new: int, device: torch.device, *, window: int | None = None, first: int = 0
) -> torch.Tensor:
    """Boolean [1, 1, new, past + new - first]: which keys (from position ``first`` on) each
    of ``new`` queries after ``past`` cached positions sees (causal, and within ``window`` in a
    sliding-window layer: the slot pool's rule for one sequence)."""
    positions = torch.arange(past, past + new, device=device).unsqueeze(0)
    return slot_visible_keys(positions, past + new, window)[..., first:]


def window_start(past: int, window: int | None) -> int:
    """The first cached position the earliest of the queries after ``past`` can see: 0 with
    full attention, else the window's start (the positions a sliding-window cache keeps)."""
    return 0 if window is None else max(0, past - window + 1)


def _attend(  # noqa: PLR0917 - the attention interface's arguments plus the layout's
    module: nn.Module,
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    past: int,
    window: int | None,
    kwargs: dict[str, Any],
) -> torch.Tensor:
    """One sequence's attention: its queries after ``past`` cached positions against its
    keys/values (all ``past`` + new positions), the way batch-1 decoding in transformers
    computes it: sliding-window layers see only the window (a sliding cache's keys), and a
    model with attention sinks (``s_aux``, GPT-OSS) runs its own eager attention with an
    additive float mask, since transformers serves it with eager attention."""
    new = query.shape[2]
    first = window_start(past, window)
    keys, values = keys[:, :, first:], values[:, :, first:]
    if kwargs.get("s_aux") is None:
        mask = causal_mask_after(past, new, query.device, window=window, first=first)
        output, _ = cpu_sdpa_attention(module, query, keys, values, mask, **kwargs)
        return output
    allowed = visible_keys(past, new, query.device, window=window, first=first)
    return eager_attention_with_sinks(module, query, keys, values, allowed, kwargs)


def packed_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention over the packed layout; without a layout, one causal sequence whose cached
    positions come first in ``key``/``value`` (so the same model still runs ``generate``
    and batch-1 code).

    Sliding-window layers (``sliding_window`` from the attention module) attend to their
    window only, and attention sinks (``s_aux``) are applied as transformers' eager path
    does; both as in batch-1 decoding with transformers' own cache, so greedy output stays
    that of ``generate``.
    """
    window = kwargs.pop("sliding_window", None)
    layout = _LAYOUT.get()
    if layout is None:
        if kwargs.get("s_aux") is None and window is None:
            return cpu_sdpa_attention(module, query, key, value, attention_mask, **kwargs)
        if attention_mask is not None:
            raise ValueError("outside a packed step, packed attention takes no mask for sinks or windows")
        past = key.shape[2] - query.shape[2]
        output = _attend(module, query, key, value, past, window, kwargs)
        return output.contiguous(), None
    layer = int(getattr(module, "layer_idx"))  # noqa: B009 - set by every supported attention module
    outputs: list[torch.Tensor] = []
    start = 0
    for cache, new in zip(layout.caches, layout.lengths, strict=True):
        stop = start + new
        past = cache.layer_length(layer)
        keys, values = cache.append(layer, key[:, :, start:stop], value[:, :, start:stop])
        outputs.append(_attend(module, query[:, :, start:stop], keys, values, past, window, kwargs))
        start = stop
    return torch.cat(outputs, dim=1), None


AttentionInterface.register(PACKED_ATTENTION, packed_attention)
