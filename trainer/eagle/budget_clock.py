"""The clock a training budget is measured on.

``wall`` is elapsed time: what a job's MaxRuntimeInSeconds and a user's patience see.
``cpu`` is the CPU time of this process, all threads summed (``time.process_time``): the
compute a head cost, whatever else the machine was running. "Trained in 30 CPU-minutes"
means ``--time-budget-minutes 30 --budget-clock cpu``; on a quiet two-core machine that is
about 15 wall-clock minutes, on a loaded one longer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

BudgetClockName = Literal["wall", "cpu"]
Clock = Callable[[], float]


def budget_clock(name: BudgetClockName) -> Clock:
    if name == "wall":
        return time.monotonic
    if name == "cpu":
        return time.process_time
    raise ValueError(f"budget_clock must be 'wall' or 'cpu', got {name!r}")
