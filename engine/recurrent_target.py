"""The serving engine's target for models with recurrent state (Qwen3-Next's linear attention).

``PackedTarget`` packs every sequence into one row over per-sequence key/value caches; a
linear-attention layer would fold all sequences of that row into one recurrent state. Here
each sequence keeps its own transformers cache and its segment runs in its own batch-1
forward, so a step costs one forward per sequence instead of one for the batch. A rejected
draft is undone as ``engine.recurrent_state`` describes: restore the state from before
the verification and run the accepted tokens again.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack

import torch
from transformers import DynamicCache, PreTrainedModel

from engine.capture import TargetFeatureCapture
from engine.recurrent_state import ForwardSnapshot, snapshot, undo_last_tokens
from engine.segments import Segment, SegmentOutput, SequenceCache, check_keep, host_token_ids
from engine.transfers import int_tables_to


class RecurrentSequenceCache:
    """One sequence's transformers cache; ``crop`` after a verification rolls the recurrent
    state back exactly (only the last forward can be undone, which is all the engine needs)."""

    def __init__(self, model: PreTrainedModel) -> None:
        self._model = model
        self._cache = DynamicCache(config=model.config)
        self._recording = False
        self._last_forward: ForwardSnapshot | None = None

    @property
    def length(self) -> int:
        return self._cache.get_seq_length()

    def run(self, token_ids: Sequence[int], keep: int) -> torch.Tensor:
        """Append ``token_ids``; the logits [keep, V] of the last ``keep`` of them."""
        # Pinned and non-blocking (engine.transfers): ``torch.tensor(..., device="cuda")`` copies
        # from pageable memory and waits for the GPU's queue, so each sequence's forward would
        # wait for the previous sequence's to finish before its kernels were even queued.
        (flat,) = int_tables_to(self._model.device, token_ids)
        input_ids = flat.view(1, -1)
        if self._recording:
            self._cache.crop(0)  # trim windows kept for a rollback that did not come
            self._last_forward = snapshot(self._cache, input_ids)
        outputs = self._model(
            input_ids=input_ids, past_key_values=self._cache, use_cache=True, logits_to_keep=keep
        )
        if not self._recording:
            # From after the prompt on, so a long prompt is not recorded in full.
            self._cache.activate_past_recording()  # type: ignore[no-untyped-call]
            self._recording = True
        logits: torch.Tensor = outputs.logits[0]
        return logits

    def crop(self, length: int) -> None:
        drop = self.length - length
        if drop < 0:
            raise ValueError(f"cannot crop a cache of {self.length} positions to {length}")
        if drop == 0:
            return
        last = self._last_forward
        if last is None:
            raise RuntimeError("a recurrent target can undo only its last forward, which was undone already")
        undo_last_tokens(self._model, self._cache, last, drop)
        self._last_forward = None


class RecurrentTarget:
    """Same interface as ``PackedTarget``: per-sequence caches, ``forward`` over segments,
    and for a head the aux-layer feature capture open for the engine's lifetime."""

    def __init__(self, model: PreTrainedModel, aux_layer_ids: Sequence[int] | None) -> None:
        self.model = model
        self._stack = ExitStack()
        self._capture: TargetFeatureCapture | None = None
        if aux_layer_ids is not None:
            self._capture = self._stack.enter_context(TargetFeatureCapture(model, aux_layer_ids))

    def new_cache(self) -> RecurrentSequenceCache:
        return RecurrentSequenceCache(self.model)

    def close(self) -> None:
        self._stack.close()

    def forward(self, segments: Sequence[Segment]) -> list[SegmentOutput]:
        """One batch-1 forward per segment; each cache grows by its segment's tokens."""
        outputs: list[SegmentOutput] = []
        for segment in segments:
            check_keep(segment)
        for segment, token_ids in zip(segments, host_token_ids(segments), strict=True):
            logits = _own(segment.cache).run(token_ids, segment.keep)
            # Read before the next sequence's forward overwrites the captured layers.
            features = self._capture.aux_hidden_states()[0] if self._capture is not None else None
            outputs.append(SegmentOutput(logits=logits, features=features))
        return outputs


def _own(cache: SequenceCache) -> RecurrentSequenceCache:
    if not isinstance(cache, RecurrentSequenceCache):
        raise TypeError(f"RecurrentTarget runs on its own caches, not {type(cache).__name__}")
    return cache
