"""What the client shim raises. Every message names the job, file or setting at fault."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import WaiterError


class EaglenestClientError(Exception):
    """Base of the shim's own errors (boto3's ClientError still covers the wire calls)."""


class EndpointNotConfiguredError(EaglenestClientError):
    """No eaglenest endpoint in the arguments, the environment or a stack.json."""


class OptimizationJobNotFoundError(EaglenestClientError):
    def __init__(self, name: str, endpoint_url: str | None) -> None:
        super().__init__(f"no optimization job named {name!r} at {endpoint_url or 'the endpoint'}")
        self.name = name


class OptimizationJobNotFinishedError(EaglenestClientError):
    """The job has not (or not successfully) published results."""

    def __init__(self, name: str, status: str, detail: str) -> None:
        super().__init__(f"optimization job {name!r} is {status}: {detail}")
        self.name = name
        self.status = status


class OptimizationJobFailedError(EaglenestClientError):
    """``wait_for_job`` saw the job end FAILED; ``description`` is its last DescribeOptimizationJob."""

    def __init__(self, name: str, description: dict[str, Any]) -> None:
        reason = description.get("FailureReason") or "no FailureReason recorded"
        super().__init__(f"optimization job {name!r} FAILED: {reason}")
        self.name = name
        self.failure_reason = description.get("FailureReason")
        self.description = description


class WaitTimeoutError(EaglenestClientError):
    """``wait_for_job`` gave up; the job itself is left running."""


class IncompleteOutputError(EaglenestClientError):
    """The output location lacks the committed layout (lineage.json or a file it lists)."""


@dataclass(frozen=True)
class ChecksumMismatch:
    path: str  # relative to S3OutputLocation, as lineage.json lists it
    expected_sha256: str
    actual_sha256: str
    expected_size: int | None
    actual_size: int


class ChecksumMismatchError(EaglenestClientError):
    def __init__(self, output_uri: str, mismatches: Sequence[ChecksumMismatch]) -> None:
        lines = [
            f"{item.path}: sha256 {item.actual_sha256} ({item.actual_size} bytes), "
            f"lineage.json records {item.expected_sha256} ({item.expected_size} bytes)"
            for item in mismatches
        ]
        names = ", ".join(item.path for item in mismatches)
        super().__init__(
            f"checksum mismatch in {names} under {output_uri}; the downloaded copies were removed:\n  "
            + "\n  ".join(lines)
        )
        self.mismatches = list(mismatches)


class OptimizationJobWaiterError(WaiterError):  # type: ignore[misc]  # botocore is untyped
    """botocore's WaiterError with the job's FailureReason (or what was not found) in the message.

    A subclass, so ``except botocore.exceptions.WaiterError`` keeps working unchanged.
    """

    def __init__(self, name: str, reason: str, last_response: dict[str, Any]) -> None:
        super().__init__(name=name, reason=reason, last_response=last_response)
        self.failure_reason: str | None = last_response.get("FailureReason")
