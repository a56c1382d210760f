"""The optimization-job waiter as a botocore Waiter whose errors say why the job ended badly.

botocore's WaiterError for a FAILED job only says that ``OptimizationJobStatus`` matched
"FAILED"; the FailureReason is buried in ``last_response``. This subclass raises
``OptimizationJobWaiterError`` (still a WaiterError) with the reason in the message.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import WaiterError
from botocore.waiter import NormalizedOperationMethod, Waiter, WaiterModel

from client.errors import OptimizationJobWaiterError
from client.waiter_model import OPTIMIZATION_JOB_WAITER, eaglenest_waiter_model


class OptimizationJobWaiter(Waiter):  # type: ignore[misc]  # botocore ships no type hints
    """Waits until an optimization job is COMPLETED or STOPPED.

    ``wait(OptimizationJobName=..., WaiterConfig={"Delay": s, "MaxAttempts": n})``.
    """

    def wait(self, **kwargs: Any) -> None:
        job_name = kwargs.get("OptimizationJobName")
        try:
            super().wait(**kwargs)
        except WaiterError as error:
            raise OptimizationJobWaiterError(
                self.name, _reason(error, job_name), error.last_response or {}
            ) from None


def optimization_job_waiter(client: Any) -> OptimizationJobWaiter:
    """The waiter for any boto3 SageMaker client, even one not made by ``eaglenest_client``."""
    config = WaiterModel(eaglenest_waiter_model()).get_waiter(OPTIMIZATION_JOB_WAITER)
    return OptimizationJobWaiter(
        OPTIMIZATION_JOB_WAITER, config, NormalizedOperationMethod(client.describe_optimization_job)
    )


def _reason(error: WaiterError, job_name: str | None) -> str:
    botocore_reason = str(error.kwargs.get("reason", error))
    response: dict[str, Any] = error.last_response or {}
    status = response.get("OptimizationJobStatus")
    if status == "FAILED":
        reason = response.get("FailureReason") or "no FailureReason recorded"
        return f"optimization job {job_name!r} FAILED: {reason}"
    code = (response.get("Error") or {}).get("Code")
    if code == "ResourceNotFound":
        return (
            f"no optimization job named {job_name!r} (ResourceNotFound: {response['Error'].get('Message')})"
        )
    if status is not None:
        return f"{botocore_reason}; optimization job {job_name!r} is still {status}"
    return botocore_reason
