"""What a continuous-batching step tells the host, and the replies of the rows that ended,
copied back without stalling the device.

After each step the device holds every slot's reply length and whether it ended. Read at once
(``overlap=False``, a CPU's default) the host waits for the step before it queues the next: on
a GPU the device then idles while the host reads, frees the ended rows' slots and launches the
next step (about half a millisecond). Read a step late (``overlap=True``, a GPU's default),
the host queues step k+1 first and reads step k's snapshot while step k+1 runs; the ended
rows' tokens and features are queued for copying then, and delivered once the next step is
queued. A row that ended runs one more step as a dead row (its writes go to the scratch
position) and its slot takes the next prompt one step later.

A snapshot is read a step late, so a slot can have changed hands since it was taken: a row
admitted, moved or freed since. Every slot has an epoch the host bumps at each such change,
and a snapshot speaks only for the slots whose epoch is still the one it recorded.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import torch

from engine.recorded_features import FeatureCopy
from engine.replies import Reply
from engine.transfers import CopiesQueued, to_host


@dataclass(frozen=True, slots=True)
class SlotSnapshot:
    """Every slot's reply length and ended flag after a step, and the slots' epochs then."""

    counts: np.ndarray  # [slots] int64
    ended: np.ndarray  # [slots] bool
    epochs: np.ndarray  # [slots] int64

    def speaks_for(self, epochs: np.ndarray) -> np.ndarray:
        """Which slots still hold the rows they held when the snapshot was taken."""
        same: np.ndarray = self.epochs == epochs
        return same


class QueuedSnapshot:
    """A step's snapshot on its way to the host (queued after the step)."""

    def __init__(self, counts: torch.Tensor, ended: torch.Tensor, epochs: np.ndarray) -> None:
        self._host = to_host(torch.stack([counts, ended.long()]))
        self._copied = CopiesQueued(counts.device)
        self._epochs = epochs.copy()

    def wait(self) -> SlotSnapshot:
        """The snapshot, once copied: the step's one host sync."""
        self._copied.wait()
        counts, ended = self._host.numpy()
        return SlotSnapshot(counts=counts, ended=ended > 0, epochs=self._epochs)


@dataclass(frozen=True, slots=True)
class EndedRow:
    """A row the host freed: where its reply goes, its length, and whether it ended (or was cut)."""

    index: int  # the prompt's index
    generated: int
    ended: bool


class PendingReplies:
    """Ended rows' tokens, greedy choices and features on their way to the host."""

    def __init__(
        self,
        rows: list[EndedRow],
        tokens: torch.Tensor | None,
        features: FeatureCopy | None,
        stop_ids: Collection[int],
        copied: CopiesQueued | None,
    ) -> None:
        self._rows, self._tokens, self._features = rows, tokens, features
        self._stop_ids, self._copied = stop_ids, copied

    @classmethod
    def none(cls) -> PendingReplies:
        return cls([], None, None, (), None)

    def replies(self) -> list[tuple[int, Reply]]:
        """``(prompt index, reply)`` of each row, once copied (waiting for the copies)."""
        if not self._rows or self._tokens is None or self._features is None:
            return []
        if self._copied is not None:
            self._copied.wait()
        tokens, argmax = self._tokens
        features = self._features.samples(argmax)
        out: list[tuple[int, Reply]] = []
        for at, row in enumerate(self._rows):
            reply = tokens[at, : row.generated].tolist()
            finished = row.ended and reply[-1] in self._stop_ids
            text, stop = (reply[:-1], reply[-1]) if finished else (reply, None)
            out.append((row.index, Reply(tokens=text, stop_token=stop, features=features[at])))
        return out
