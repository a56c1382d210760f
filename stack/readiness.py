"""Waiting for a child to become ready, failing fast (with its log) when it died instead."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from stack.processes import ManagedProcess


class StackStartError(RuntimeError):
    """A part of the stack did not come up; the message carries the end of its log."""


def wait_until_ready(
    is_ready: Callable[[], bool],
    *,
    what: str,
    process: ManagedProcess,
    timeout_seconds: float,
    interval_seconds: float = 0.2,
) -> None:
    deadline = time.monotonic() + timeout_seconds
    while True:
        code = process.exit_code()
        if code is not None:
            raise StackStartError(
                f"{process.name} exited with status {code} before {what} was ready; "
                f"last lines of {process.spec.log_path}:\n{process.log_tail()}"
            )
        if _safely(is_ready):
            return
        if time.monotonic() >= deadline:
            raise StackStartError(
                f"{what} not ready after {timeout_seconds:g} s; "
                f"last lines of {process.spec.log_path}:\n{process.log_tail()}"
            )
        time.sleep(interval_seconds)


def http_ok(url: str) -> Callable[[], bool]:
    def probe() -> bool:
        return httpx.get(url, timeout=2.0).status_code == 200

    return probe


def _safely(probe: Callable[[], bool]) -> bool:
    try:
        return probe()
    except Exception:
        # Connection refused, timeouts, 5xx while starting: all mean "not yet".
        return False
