"""The serving target on a slot pool: every sequence's new tokens in one right-padded batch,
one attention call per layer, keys written in place at device-side positions.

Where ``engine.packed_target.PackedTarget`` attends sequence by sequence so that
greedy output is bit-for-bit batch-1 decoding's (the CPU promise), this target is what a
GPU wants: the number of kernel launches per step does not grow with the number of
sequences, a cache never grows by concatenation, and rolling back rejected drafts is only a
smaller length. Verification stays lossless in the sense vLLM and SGLang give it: a draft is
accepted only while it equals the target's argmax (or passes rejection sampling) from this
very verify pass.

A sequence holds one slot from ``new_cache`` until its cache is dropped.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import torch
from transformers import PreTrainedModel

from engine.cuda_graphs import GRAPHED_WIDTH
from engine.replies import FeatureRecorder
from engine.runner import SlotRunner, key_length_for, pad_rows
from engine.segments import Segment, SegmentOutput, check_keep
from engine.transfers import int_tables_to


class SlotCache:
    """One sequence's place in the pool: its slot and how many positions it holds."""

    def __init__(self, slot: int, capacity: int) -> None:
        self.slot, self._capacity, self._length = slot, capacity, 0

    @property
    def length(self) -> int:
        return self._length

    def check_room(self, count: int) -> None:
        if self._length + count > self._capacity:
            raise ValueError(
                f"a sequence of {self._length + count} positions does not fit the pool's {self._capacity}"
            )

    def grow(self, count: int) -> None:
        self.check_room(count)
        self._length += count

    def crop(self, length: int) -> None:
        if not 0 <= length <= self._length:
            raise ValueError(f"cannot crop a cache of {self._length} positions to {length}")
        self._length = length


class SlotTarget:
    """Owns the target for the serving engine on GPUs; ``recorder`` (open for the target's
    lifetime) records the head's aux-layer features of every new position."""

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        max_sequences: int,
        max_positions: int,
        recorder: FeatureRecorder | None = None,
    ) -> None:
        self.model = model
        self.runner = SlotRunner(
            model,
            slots=max_sequences,
            capacity=max_positions + 1,
            recorder=recorder,
            graph_rows=max_sequences,
        )
        self._free = list(range(max_sequences - 1, -1, -1))
        self._recorder = recorder
        if recorder is not None:
            recorder.__enter__()

    def new_cache(self) -> SlotCache:
        if not self._free:
            raise RuntimeError(f"all {self.runner.pool.slots} sequence slots of the pool are in use")
        cache = SlotCache(self._free.pop(), self.runner.pool.capacity - 1)
        weakref.finalize(cache, self._free.append, cache.slot)
        return cache

    def close(self) -> None:
        if self._recorder is not None:
            self._recorder.__exit__(None, None, None)
        self.runner.close()

    @torch.inference_mode()
    def forward(self, segments: Sequence[Segment]) -> list[SegmentOutput]:
        """One forward over every segment; each cache grows by its segment's tokens."""
        # Rows go in slot order: when the batch holds slots 0..B-1 (slots are handed out lowest
        # first, so usually), every layer reads the pool as a view instead of gathering the
        # batch's keys and values.
        order = sorted(range(len(segments)), key=lambda index: _slot_cache(segments[index].cache).slot)
        by_index = dict(zip(order, self._forward([segments[index] for index in order]), strict=True))
        return [by_index[index] for index in range(len(segments))]

    def _forward(self, segments: Sequence[Segment]) -> list[SegmentOutput]:
        caches = [_slot_cache(segment.cache) for segment in segments]
        for segment, cache in zip(segments, caches, strict=True):
            check_keep(segment)
            cache.check_room(segment.length)
        device, pool = self.runner.pool.device, self.runner.pool
        lengths = np.array([s.length for s in segments])
        starts = np.array([cache.length for cache in caches])
        width = int(lengths.max())
        positions = starts[:, None] + np.arange(width)[None, :]
        real = np.arange(width)[None, :] < lengths[:, None]
        # Flat indices of the kept positions (the last ``keep`` of each row), then of every real one.
        kept = np.concatenate(
            [
                row * width + np.arange(n - s.keep, n)
                for row, (s, n) in enumerate(zip(segments, lengths, strict=True))
            ]
        )
        every = np.flatnonzero(real.reshape(-1))
        ids, at, writes, slots, kept_rows, real_rows, draft_at = int_tables_to(
            device,
            pad_rows([[*s.token_ids, *[0] * s.num_drafted] for s in segments], 0),
            positions,
            np.where(real, positions, pool.scratch),
            [cache.slot for cache in caches],
            kept,
            every,
            _draft_places(segments, width),
        )
        drafted = [s.drafted for s in segments if s.drafted is not None]
        if drafted:
            # The drafts go in on the device: reading them back first would make the host wait
            # for the head's whole chain before it could queue this forward.
            ids.index_copy_(0, draft_at, torch.cat(drafted).to(ids.dtype))
        # Decode and verify steps (no prompt in the batch) replay a graph on a GPU; a step with a
        # joining prompt runs eagerly.
        step = self.runner.decode if starts.all() and width <= GRAPHED_WIDTH else self.runner.forward
        contiguous = [cache.slot for cache in caches] == list(range(len(caches)))
        output = step(
            ids.view(len(segments), width),
            at.view(len(segments), width),
            writes.view(len(segments), width),
            slots=None if contiguous else slots,
            key_length=key_length_for(int((starts + lengths).max()), pool.capacity),
        )
        for cache, length in zip(caches, lengths.tolist(), strict=True):
            cache.grow(length)
        flat = output.hidden.reshape(-1, output.hidden.shape[-1])
        logits = torch.split(self.runner.logits(flat[kept_rows]), [s.keep for s in segments])
        aux = output.aux
        if aux is None:
            return [SegmentOutput(logits=rows, features=None) for rows in logits]
        features = torch.split(aux.reshape(-1, aux.shape[-1])[real_rows], lengths.tolist())
        return [SegmentOutput(logits=r, features=f) for r, f in zip(logits, features, strict=True)]


def _draft_places(segments: Sequence[Segment], width: int) -> list[int]:
    """Flat indices, in the padded ``[rows, width]`` id table, of every segment's device
    drafts (after its host tokens), in the order ``torch.cat`` lays the drafts out."""
    places: list[int] = []
    for row, segment in enumerate(segments):
        start = row * width + len(segment.token_ids)
        places.extend(range(start, start + segment.num_drafted))
    return places


def _slot_cache(cache: object) -> SlotCache:
    if not isinstance(cache, SlotCache):
        raise TypeError(f"SlotTarget runs on its own SlotCache objects, not {type(cache).__name__}")
    return cache
