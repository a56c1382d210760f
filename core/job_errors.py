"""Why a job run ends early; each maps to one final status and FailureReason."""

from __future__ import annotations


class JobInterruptedError(BaseException):
    """Base of the ways a running job is cut short from outside its stages.

    A BaseException, like KeyboardInterrupt: it may be raised inside library code (by the
    monitor's signal handler), and libraries catch ``Exception`` freely. botocore, for one,
    wraps any Exception during a request in a retryable HTTPClientError and tries again, so
    an ordinary exception would never reach the runner.
    """


class StopRequestedError(JobInterruptedError):
    """StopOptimizationJob was called: the job ends STOPPED."""

    def __init__(self) -> None:
        super().__init__("Job stopped by StopOptimizationJob")


class MaxRuntimeExceededError(JobInterruptedError):
    """The job ran past StoppingCondition.MaxRuntimeInSeconds: the job ends FAILED."""

    def __init__(self, max_runtime_seconds: int) -> None:
        self.max_runtime_seconds = max_runtime_seconds
        super().__init__(f"Job exceeded MaxRuntimeInSeconds ({max_runtime_seconds} s)")


class JobFailedError(Exception):
    """A stage found a problem the user must fix; the message becomes the FailureReason as is."""
