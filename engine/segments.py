"""What a serving target is asked to run in one step, and what it hands back.

Both serving targets speak this: the exact packed target (``engine.packed_target``,
attention sequence by sequence, bit-for-bit batch-1 decoding on CPU) and the slot-pool target
(``engine.slot_target``, one attention call per layer, for GPUs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from transformers import PreTrainedModel


class SequenceCache(Protocol):
    """What the serving engine needs of one sequence's target cache."""

    @property
    def length(self) -> int:
        """Positions held."""
        ...

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions (after a verification: drop rejected drafts)."""
        ...


@dataclass(frozen=True, slots=True)
class Segment:
    """New tokens of one sequence for this step; logits are kept for the last ``keep``."""

    cache: SequenceCache
    token_ids: Sequence[int]
    keep: int


@dataclass(frozen=True, slots=True)
class SegmentOutput:
    logits: torch.Tensor  # [keep, V]
    features: torch.Tensor | None  # [n, 3H] EAGLE-3 features of every new position, if captured


class ServingTarget(Protocol):
    """The target behind the serving engine: one ``forward`` per step over every sequence."""

    model: PreTrainedModel

    def new_cache(self) -> SequenceCache: ...

    def forward(self, segments: Sequence[Segment]) -> list[SegmentOutput]: ...

    def close(self) -> None: ...


def check_keep(segment: Segment) -> None:
    if not 1 <= segment.keep <= len(segment.token_ids):
        raise ValueError(f"keep={segment.keep} is outside 1..{len(segment.token_ids)}")
