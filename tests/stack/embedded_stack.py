"""`eaglenest up` started as a user runs it (a subprocess in a fresh state directory), for tests
that drive it with boto3 and the AWS CLI. ``start_embedded_stack`` stops it again (SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest

from stack.ports import free_port
from stack.stack_file import StackInfo, read_stack_file, stack_file_path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_SECONDS = 120
TERMINAL = {"COMPLETED", "FAILED", "STOPPED"}


class RunningStack:
    def __init__(self, process: subprocess.Popen[bytes], info: StackInfo, output: Path) -> None:
        self.process = process
        self.info = info
        self.output = output

    def aws_env(self) -> dict[str, str]:
        return {
            **os.environ,
            "AWS_ACCESS_KEY_ID": self.info.aws_access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.info.aws_secret_access_key,
            "AWS_DEFAULT_REGION": self.info.region,
        }

    def client(self, service: str, endpoint_url: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=endpoint_url,
            aws_access_key_id=self.info.aws_access_key_id,
            aws_secret_access_key=self.info.aws_secret_access_key,
            region_name=self.info.region,
        )


@contextmanager
def start_embedded_stack(tmp_path: Path, settings: dict[str, str] | None = None) -> Iterator[RunningStack]:
    """`eaglenest up` with no EAGLENEST_* variable of this process, only ``settings`` (operator
    settings the stack's api and worker inherit, e.g. EAGLENEST_TRAIN_OVERRIDES)."""
    state_dir = tmp_path / "state"
    output = tmp_path / "up.out"
    env = {key: value for key, value in os.environ.items() if not key.startswith("EAGLENEST_")}
    env.update(settings or {})
    with output.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.main",
                "up",
                "--state-dir",
                str(state_dir),
                "--port",
                str(free_port()),
                "--s3-port",
                "0",
            ],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while not stack_file_path(state_dir).exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"eaglenest up did not start (exit {process.poll()}):\n{output.read_text()}")
            time.sleep(0.2)
        yield RunningStack(process, read_stack_file(state_dir), output)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def wait_for_terminal(
    sagemaker: Any, name: str, timeout: float = 60, while_waiting: Callable[[], None] | None = None
) -> dict[str, Any]:
    """DescribeOptimizationJob once the job has ended (or at the timeout, whatever its status).

    ``while_waiting`` runs at every poll before the job ended: a test observes there what only
    exists while the job runs (the worker's pool process leaves once its one task returned).
    """
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = sagemaker.describe_optimization_job(OptimizationJobName=name)
        if job["OptimizationJobStatus"] in TERMINAL or time.monotonic() > deadline:
            return job
        if while_waiting is not None:
            while_waiting()
        time.sleep(0.3)
