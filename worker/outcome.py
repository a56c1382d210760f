"""How a run of the pipeline ended, and which final status that gives the job."""

from __future__ import annotations

from dataclasses import dataclass

from db.models.optimization_job_status import OptimizationJobStatus


@dataclass(frozen=True)
class Outcome:
    status: OptimizationJobStatus
    message: str
    failure_reason: str | None = None

    @classmethod
    def completed(cls) -> Outcome:
        return cls(OptimizationJobStatus.COMPLETED, "Job completed")

    @classmethod
    def stopped(cls, message: str = "Job stopped by StopOptimizationJob") -> Outcome:
        return cls(OptimizationJobStatus.STOPPED, message)

    @classmethod
    def failed(cls, failure_reason: str) -> Outcome:
        return cls(OptimizationJobStatus.FAILED, f"Job failed: {failure_reason}", failure_reason)


def final_transition(current: OptimizationJobStatus, outcome: Outcome) -> Outcome | None:
    """The transition to record, given the status the job has *now*; None to leave it alone.

    A finished job is never reopened (a late duplicate delivery must not overwrite it), and a
    stop request that arrived while the last stage was finishing still wins over COMPLETED:
    the user asked for the job to stop, so it must not report success afterwards.
    """
    if current.is_terminal:
        return None
    if current is OptimizationJobStatus.STOPPING and outcome.status is OptimizationJobStatus.COMPLETED:
        return Outcome.stopped("Job stopped by StopOptimizationJob after its last stage finished")
    return outcome
