"""Rolling back a target whose cache holds recurrent state (Qwen3-Next's linear attention).

A key/value cache forgets rejected drafts by dropping their positions. A linear-attention
layer folds every token it sees into one recurrent state (plus a short convolution window),
so nothing can be dropped: the state after a verification has absorbed the rejected drafts.
The engine therefore snapshots the recurrent states before each forward that may be rolled
back, and a rollback restores them, crops every layer back to before that forward (keys and
values, and the convolution windows transformers records once ``activate_past_recording``
is on) and runs the accepted tokens again. That costs one more (short) forward whenever a
draft is rejected, and keeps the state exactly what plain decoding would have.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import LinearAttentionCacheLayerMixin


def has_recurrent_state(cache: DynamicCache) -> bool:
    """Whether some layer keeps state that cropping positions cannot undo."""
    return any(isinstance(layer, LinearAttentionCacheLayerMixin) for layer in cache.layers)


@dataclass(frozen=True)
class ForwardSnapshot:
    """The recurrent states before one forward, and what that forward was given."""

    recurrent: list[dict[int, torch.Tensor]]  # per cache layer (empty for attention layers)
    input_ids: torch.Tensor  # [1, T]


def snapshot(cache: DynamicCache, input_ids: torch.Tensor) -> ForwardSnapshot:
    states: list[dict[int, torch.Tensor]] = []
    for layer in cache.layers:
        saved: dict[int, torch.Tensor] = {}
        if isinstance(layer, LinearAttentionCacheLayerMixin):
            for index, state in layer.recurrent_states.items():
                if state is not None and layer.is_recurrent_states_initialized[index]:
                    saved[index] = state.clone()
        states.append(saved)
    return ForwardSnapshot(recurrent=states, input_ids=input_ids)


def restore_before(cache: DynamicCache, taken: ForwardSnapshot) -> None:
    """Put the cache back as it was before the snapshotted forward."""
    cache.crop(-int(taken.input_ids.shape[1]))
    for layer, saved in zip(cache.layers, taken.recurrent, strict=True):
        if isinstance(layer, LinearAttentionCacheLayerMixin):
            for index, state in saved.items():
                current = layer.recurrent_states[index]
                assert current is not None  # initialised when the snapshot was taken
                current.copy_(state)


def undo_last_tokens(
    model: PreTrainedModel, cache: DynamicCache, taken: ForwardSnapshot, num_tokens: int
) -> None:
    """Forget the last ``num_tokens`` tokens of the snapshotted forward (the cache's last):
    restore the state from before it, run the tokens it keeps again and trim the convolution
    windows recorded for the rollback."""
    given = int(taken.input_ids.shape[1])
    if not 0 < num_tokens <= given:
        raise ValueError(f"can undo 1..{given} tokens of the last forward, not {num_tokens}")
    restore_before(cache, taken)
    kept = taken.input_ids[:, : given - num_tokens]
    if kept.shape[1]:
        model(input_ids=kept, past_key_values=cache, use_cache=True, logits_to_keep=1)
    cache.crop(0)
