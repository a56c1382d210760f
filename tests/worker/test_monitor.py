from __future__ import annotations

import threading
import time

import pytest

from core.job_errors import MaxRuntimeExceededError, StopRequestedError
from worker.monitor import JobMonitor, RuntimeLimit


def _monitor(
    stop: threading.Event | None = None, limit: RuntimeLimit | None = None, grace: float = 5.0
) -> JobMonitor:
    flag = stop or threading.Event()
    return JobMonitor(
        stop_requested=flag.is_set,
        runtime_limit=limit,
        poll_interval_seconds=0.05,
        interrupt_grace_seconds=grace,
    )


def test_nothing_happens_without_stop_or_limit() -> None:
    with _monitor() as monitor:
        time.sleep(0.2)
        monitor.check()
        assert not monitor.should_stop()


def test_a_stop_request_is_seen_by_cooperative_checks() -> None:
    stop = threading.Event()
    with _monitor(stop) as monitor:
        stop.set()
        deadline = time.monotonic() + 2
        while not monitor.should_stop() and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(StopRequestedError):
            monitor.check()


def test_the_deadline_fails_the_check_with_the_limit_named() -> None:
    with _monitor(limit=RuntimeLimit(max_runtime_seconds=60, remaining_seconds=0.1)) as monitor:
        monitor.check()
        time.sleep(0.15)
        with pytest.raises(MaxRuntimeExceededError, match=r"Job exceeded MaxRuntimeInSeconds \(60 s\)"):
            monitor.check()


def test_a_stage_that_never_checks_is_interrupted_after_the_grace_period() -> None:
    stop = threading.Event()
    started = time.monotonic()
    stop.set()
    with pytest.raises(StopRequestedError), _monitor(stop, grace=0.3):
        time.sleep(30)  # a blocking call that never looks at the stop flag
    assert time.monotonic() - started < 5


def test_a_blocking_stage_past_its_deadline_is_interrupted() -> None:
    started = time.monotonic()
    limit = RuntimeLimit(max_runtime_seconds=1, remaining_seconds=0.2)
    with pytest.raises(MaxRuntimeExceededError), _monitor(limit=limit, grace=0.2):
        time.sleep(30)
    assert time.monotonic() - started < 5


def test_no_interruption_once_the_monitored_block_has_ended() -> None:
    stop = threading.Event()
    with _monitor(stop, grace=0.1):
        stop.set()
    time.sleep(0.4)  # would raise here if the handler were still armed


def test_a_failing_stop_probe_does_not_kill_the_watcher() -> None:
    calls = 0

    def flaky() -> bool:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionError("database restarting")
        return True

    monitor = JobMonitor(stop_requested=flaky, runtime_limit=None, poll_interval_seconds=0.05)
    with monitor:
        deadline = time.monotonic() + 2
        while not monitor.should_stop() and time.monotonic() < deadline:
            time.sleep(0.01)
    assert monitor.should_stop()
    assert calls >= 3
