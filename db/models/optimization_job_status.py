"""SageMaker's OptimizationJobStatus, value for value."""

from __future__ import annotations

from enum import StrEnum


class OptimizationJobStatus(StrEnum):
    INPROGRESS = "INPROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    STARTING = "STARTING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {OptimizationJobStatus.COMPLETED, OptimizationJobStatus.FAILED, OptimizationJobStatus.STOPPED}
)
ACTIVE_STATUSES = frozenset(set(OptimizationJobStatus) - TERMINAL_STATUSES)
STOPPABLE_STATUSES = frozenset({OptimizationJobStatus.STARTING, OptimizationJobStatus.INPROGRESS})
