"""``wait_for_job``: follow a job to its end with a progress bar fed by the worker's reports."""

from __future__ import annotations

import sys
import time
from typing import IO, Any

import httpx
from tqdm import tqdm

from client.errors import OptimizationJobFailedError, WaitTimeoutError
from client.rest import REQUEST_TIMEOUT_SECONDS, describe_job_progress

TERMINAL_STATUSES = frozenset({"COMPLETED", "FAILED", "STOPPED"})
# What sagemaker-python-sdk uses for optimization jobs (Session.wait_for_optimization_job).
DEFAULT_POLL_SECONDS = 5.0
BAR_FORMAT = "{desc} |{bar}| {percentage:3.0f}% [{elapsed}{postfix}]"


def wait_for_job(
    client: Any,
    name: str,
    progress: bool = True,
    *,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    timeout_seconds: float | None = None,
    file: IO[str] | None = None,
) -> dict[str, Any]:
    """Wait until job ``name`` is COMPLETED or STOPPED and return its DescribeOptimizationJob.

    Raises OptimizationJobFailedError (with FailureReason) if it ends FAILED,
    OptimizationJobNotFoundError if there is no such job, and WaitTimeoutError after
    ``timeout_seconds``. The bar (on ``file``, default stderr) shows the stage, overall
    percent, ETA and the worker's last message; each new stage is also written as a line.
    Ctrl-C only stops the waiting: the job keeps running, and how to stop it is printed.
    """
    out = file if file is not None else sys.stderr
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    bar = _JobBar(name, enabled=progress, file=out)
    status = "unknown"
    try:
        with httpx.Client(timeout=REQUEST_TIMEOUT_SECONDS) as http:
            while True:
                detail = describe_job_progress(client, name, http=http)
                status = str(detail["OptimizationJobStatus"])
                bar.show(detail)
                if status in TERMINAL_STATUSES:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise WaitTimeoutError(
                        f"optimization job {name!r} is still {status} after {timeout_seconds} s "
                        "of waiting; it keeps running"
                    )
                time.sleep(poll_seconds)
    except KeyboardInterrupt:
        bar.close()
        print(_stop_hint(client, name, status), file=out, flush=True)
        raise
    finally:
        bar.close()
    description: dict[str, Any] = client.describe_optimization_job(OptimizationJobName=name)
    if description["OptimizationJobStatus"] == "FAILED":
        raise OptimizationJobFailedError(name, description)
    return description


def _stop_hint(client: Any, name: str, status: str) -> str:
    return (
        f"\nStopped waiting. Optimization job {name} ({status}) was NOT stopped and keeps running.\n"
        f"To stop it: aws sagemaker stop-optimization-job --optimization-job-name {name} "
        f"--endpoint-url {client.meta.endpoint_url} --region {client.meta.region_name}\n"
        f"        or: client.stop_optimization_job(OptimizationJobName={name!r})"
    )


class _JobBar:
    """A tqdm bar over the job's overall percent; the stage, ETA and last message around it."""

    def __init__(self, name: str, *, enabled: bool, file: IO[str]) -> None:
        self.name = name
        self.file = file
        self.stages_written: set[str] = set()
        self.bar = tqdm(
            total=100, desc=name, disable=not enabled, file=file, bar_format=BAR_FORMAT, dynamic_ncols=True
        )

    def show(self, detail: dict[str, Any]) -> None:
        if self.bar.disable:
            return
        status = str(detail["OptimizationJobStatus"])
        stage = detail.get("Stage")
        for entered in _stages_entered(detail):
            if entered not in self.stages_written:
                self.stages_written.add(entered)
                tqdm.write(f"{self.name}: stage {entered}", file=self.file)
        percent = 100.0 if status == "COMPLETED" else detail.get("ProgressPercent")
        if percent is not None:
            self.bar.n = min(100.0, max(0.0, float(percent)))
        self.bar.set_description_str(f"{self.name} {status}" + (f" {stage}" if stage else ""), refresh=False)
        self.bar.set_postfix_str(_postfix(detail), refresh=False)
        self.bar.refresh()
        if status in TERMINAL_STATUSES:
            tqdm.write(f"{self.name}: {status}", file=self.file)

    def close(self) -> None:
        self.bar.close()


def _stages_entered(detail: dict[str, Any]) -> list[str]:
    """Every stage the job has entered, in order: its history's (a stage shorter than a poll
    falls between two polls), then the current one."""
    stages = [str(event["Stage"]) for event in detail.get("Events") or [] if event.get("Stage")]
    current = detail.get("Stage")
    return [*stages, str(current)] if current else stages


def _postfix(detail: dict[str, Any]) -> str:
    parts = []
    eta = detail.get("EtaSeconds")
    if eta is not None and detail["OptimizationJobStatus"] not in TERMINAL_STATUSES:
        parts.append(f"ETA {_duration(float(eta))}")
    message = detail.get("LastMessage")
    if message:
        parts.append(str(message))
    return " | ".join(parts)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
