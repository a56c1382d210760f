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
    """New tokens of one sequence for this step; logits are kept for the last ``keep``.

    ``drafted`` are draft ids still on the device, fed after ``token_ids``: a serving step
    hands its drafts to the target without reading them back, so on a GPU the host builds and
    queues the verification while the head's chain is still running (the drafts come back
    with the verdicts, in the step's one read)."""

    cache: SequenceCache
    token_ids: Sequence[int]
    keep: int
    drafted: torch.Tensor | None = None  # [k] ids, after token_ids

    @property
    def num_drafted(self) -> int:
        """Ids in ``drafted`` (a shape, never a read-back)."""
        return 0 if self.drafted is None else int(self.drafted.shape[0])

    @property
    def length(self) -> int:
        """Tokens fed: ``token_ids`` then ``drafted``."""
        return len(self.token_ids) + self.num_drafted


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
    if not 1 <= segment.keep <= segment.length:
        raise ValueError(f"keep={segment.keep} is outside 1..{segment.length}")


def host_token_ids(segments: Sequence[Segment]) -> list[list[int]]:
    """Every segment's tokens on the host, its drafts included, read back in one copy for the
    batch: for the targets that build their inputs on the host (the CPU's exact packed
    target, a recurrent target's forward per sequence)."""
    drafted = [segment.drafted for segment in segments if segment.drafted is not None]
    flat: list[int] = torch.cat(drafted).tolist() if drafted else []
    tokens: list[list[int]] = []
    start = 0
    for segment in segments:
        tokens.append([*segment.token_ids, *flat[start : start + segment.num_drafted]])
        start += segment.num_drafted
    return tokens
