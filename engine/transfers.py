"""Small tables (token ids, positions, slots, indices; sampling settings) from the host to the
device in one copy that does not stall the device.

A step's bookkeeping lives on the host (lengths, the layout of a padded batch) and reaches
the device as a handful of small tensors. ``torch.tensor(values, device="cuda")`` copies from
pageable memory, which makes the host wait until the device's queue has drained: a stall
per tensor, in the middle of a step. Here every table of a step goes in one buffer, through
pinned memory with ``non_blocking``, so the host queues the copy and goes on (torch keeps
the pinned buffer alive until the copy has run). On a CPU it is one tensor, split.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

# A table: a flat list of ints, rows of ints (a padded batch) or a numpy array of any shape.
IntTable = Sequence[int] | Sequence[Sequence[int]] | np.ndarray


def int_tables_to(device: torch.device, *tables: IntTable) -> list[torch.Tensor]:
    """Each of ``tables``, flattened, as an int64 tensor on ``device``, all in one copy."""
    return _tables_to(device, tables, np.int64)


def float_tables_to(device: torch.device, *tables: Sequence[float]) -> list[torch.Tensor]:
    """Each of ``tables`` as a float32 tensor on ``device``, all in one copy (per-row sampling
    settings: temperatures, top-p)."""
    return _tables_to(device, tables, np.float32)


def _tables_to(
    device: torch.device, tables: Sequence[IntTable | Sequence[float]], dtype: type[np.generic]
) -> list[torch.Tensor]:
    flat = [np.asarray(table, dtype=dtype).reshape(-1) for table in tables]
    host = torch.from_numpy(np.concatenate(flat) if flat else np.zeros(0, dtype=dtype))
    moved = host.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else host.to(device)
    return list(torch.split(moved, [len(table) for table in flat]))


def to_host(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` in host memory. From a GPU the copy is only queued (into pinned memory) and
    the host goes on: read it once a ``CopiesQueued`` made after the copy has been waited on."""
    return tensor.to("cpu", non_blocking=True) if tensor.device.type == "cuda" else tensor.cpu()


class CopiesQueued:
    """Marks the device's queue after some ``to_host`` copies: ``wait`` returns once they have
    run (at once on a CPU, where they already have)."""

    def __init__(self, device: torch.device) -> None:
        self._event: torch.cuda.Event | None = None
        if device.type == "cuda":
            self._event = torch.cuda.Event()  # type: ignore[no-untyped-call]
            self._event.record()

    def wait(self) -> None:
        if self._event is not None:
            self._event.synchronize()
