"""How far each rank of a data-parallel run has got: the collectives it has entered.

Every rank counts the collectives it enters and writes the count to its own small file beside
the group's store; rank 0 also keeps, in memory, when its current collective began. A rank that
hangs (a stuck kernel, a stopped process, a wedged device) stops every other rank in its next
collective, and neither gloo nor NCCL says so before the 10-minute collective timeout. With these
counts rank 0's ``RankWatch`` sees that it has waited too long in a collective and which ranks
never reached it, and ends the run in minutes, naming them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class CollectiveClock:
    """This rank's count of collectives entered (written to ``count_file`` at each) and the
    monotonic time its current one began (None between collectives)."""

    def __init__(self, count_file: Path) -> None:
        self.count_file = count_file
        self.count = 0
        self.entered_at: float | None = None
        count_file.write_text("0")

    @contextmanager
    def collective(self) -> Iterator[None]:
        """Around one collective, its wait for the device's result included."""
        self.count += 1
        # Written before entering, so a rank stuck inside collective n has written n: rank 0
        # tells "never reached it" (a hung rank) from "reached it, and it did not complete".
        self.count_file.write_text(str(self.count))
        self.entered_at = time.monotonic()
        try:
            yield
        finally:
            self.entered_at = None

    def seconds_inside(self) -> float | None:
        """How long this rank has been in its current collective; None when it is in none."""
        entered_at = self.entered_at  # one read: the main thread may clear it meanwhile
        return None if entered_at is None else time.monotonic() - entered_at


def count_file_for(store_path: Path, rank: int) -> Path:
    return store_path.with_name(f"{store_path.name}.rank-{rank}-collectives")


def remove_count_files(store_path: Path, world_size: int) -> None:
    for rank in range(world_size):
        count_file_for(store_path, rank).unlink(missing_ok=True)


def read_count(count_file: Path) -> int | None:
    """A rank's count of collectives entered; None when its file is missing or mid-write."""
    try:
        return int(count_file.read_text())
    except (OSError, ValueError):
        return None
