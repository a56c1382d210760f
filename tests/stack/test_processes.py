from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from stack.processes import ManagedProcess, ProcessSpec, RestartPolicy
from stack.readiness import StackStartError, wait_until_ready
from stack.supervisor import ChildExit, Supervisor


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def _descendants(pid: int, count: int, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = [child.pid for child in psutil.Process(pid).children(recursive=True)]
        if len(children) >= count:
            return children
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not start {count} children")


def test_stop_ends_the_process_and_everything_it_forked(tmp_path: Path) -> None:
    process = ManagedProcess(
        ProcessSpec(
            name="forker", argv=["sh", "-c", "sleep 300 & sleep 300 & wait"], log_path=tmp_path / "f.log"
        )
    )
    process.start()
    children = _descendants(process.pid, 2)

    process.stop()

    assert _wait_gone([process.pid, *children]) == []


def test_a_process_ignoring_sigterm_is_killed_after_its_timeout(tmp_path: Path) -> None:
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(300)"
    )
    process = ManagedProcess(
        ProcessSpec(
            name="stubborn",
            argv=[sys.executable, "-c", script],
            log_path=tmp_path / "s.log",
            stop_timeout_seconds=0.5,
        )
    )
    process.start()
    wait_until_ready(lambda: "up" in process.log_tail(), what="stubborn", process=process, timeout_seconds=10)
    started = time.monotonic()

    process.stop()

    assert time.monotonic() - started < 5
    assert process.exit_code() == -signal.SIGKILL


def test_children_die_with_a_killed_parent(tmp_path: Path) -> None:
    # A parent that supervises a sleeper and is then SIGKILLed (no chance to clean up).
    pid_file = tmp_path / "child.pid"
    parent_script = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from stack.processes import ManagedProcess, ProcessSpec
        log = Path({str(tmp_path)!r}) / "c.log"
        child = ManagedProcess(ProcessSpec(name="sleeper", argv=["sleep", "300"], log_path=log))
        child.start()
        Path({str(pid_file)!r}).write_text(str(child.pid))
        time.sleep(300)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_script], cwd=Path(__file__).parents[2])
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        child_pid = int(pid_file.read_text())
        assert _alive(child_pid)

        parent.kill()
        parent.wait()

        assert _wait_gone([child_pid]) == []
    finally:
        parent.kill()
        parent.wait()


def _next_exit(supervisor: Supervisor, timeout: float = 10.0) -> ChildExit:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exits = supervisor.check().exits
        if exits:
            (child,) = exits
            return child
        time.sleep(0.05)
    raise AssertionError("no child exited")


def _wait_restarted(supervisor: Supervisor, timeout: float = 10.0) -> list[ManagedProcess]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        restarted = supervisor.check().restarted
        if restarted:
            return restarted
        time.sleep(0.05)
    raise AssertionError("no child was restarted")


def test_supervisor_reports_a_child_that_exited_and_stops_the_rest(tmp_path: Path) -> None:
    with Supervisor() as supervisor:
        sleeper = supervisor.start(
            ProcessSpec(name="sleeper", argv=["sleep", "300"], log_path=tmp_path / "a.log")
        )
        quitter = supervisor.start(
            ProcessSpec(name="quitter", argv=["sh", "-c", "exit 3"], log_path=tmp_path / "b.log")
        )
        child = _next_exit(supervisor)
        assert child.process is quitter
        assert (child.exit_code, child.restart_in_seconds) == (3, None)  # no restart policy
    assert _wait_gone([sleeper.pid]) == []


def test_a_killed_child_is_restarted_with_backoff_while_the_others_run(tmp_path: Path) -> None:
    policy = RestartPolicy(max_restarts=2, window_seconds=60, first_delay_seconds=0.2, max_delay_seconds=5)
    with Supervisor() as supervisor:
        other = supervisor.start(
            ProcessSpec(name="other", argv=["sleep", "300"], log_path=tmp_path / "a.log")
        )
        log = tmp_path / "crashy.log"
        crashy = supervisor.start(
            ProcessSpec(name="crashy", argv=["sleep", "300"], log_path=log, restart=policy)
        )
        first_pid = crashy.pid

        os.kill(first_pid, signal.SIGKILL)
        child = _next_exit(supervisor)
        assert (child.process, child.exit_code, child.restart_in_seconds, child.restarts) == (
            crashy,
            -signal.SIGKILL,
            0.2,
            1,
        )
        assert _wait_restarted(supervisor) == [crashy]
        assert crashy.is_running()
        assert crashy.pid != first_pid
        assert other.is_running()
        assert supervisor.restart_counts() == {"crashy": 1}
        assert "crashy exited with status -9; restarting it in 0.2 s (restart 1; at most 2 within 60 s)" in (
            log.read_text()
        )

        os.kill(crashy.pid, signal.SIGKILL)
        assert _next_exit(supervisor).restart_in_seconds == 0.4  # the delay doubles
        _wait_restarted(supervisor)

        os.kill(crashy.pid, signal.SIGKILL)
        gave_up = _next_exit(supervisor)  # a third crash within the window: the stack must stop
        assert (gave_up.restart_in_seconds, gave_up.restarts) == (None, 2)
        assert other.is_running()


def test_what_a_crashed_child_left_running_is_killed_before_its_restart(tmp_path: Path) -> None:
    script = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
    with Supervisor() as supervisor:
        parent = supervisor.start(
            ProcessSpec(
                name="worker",
                argv=[sys.executable, "-c", script],
                log_path=tmp_path / "w.log",
                restart=RestartPolicy(first_delay_seconds=0.1),
            )
        )
        (pool_process,) = _descendants(parent.pid, 1)
        os.kill(parent.pid, signal.SIGKILL)  # as kill -9 of a Celery worker leaves its pool process
        _next_exit(supervisor)
        assert _wait_gone([pool_process]) == []


def test_readiness_fails_fast_with_the_log_of_a_child_that_died(tmp_path: Path) -> None:
    process = ManagedProcess(
        ProcessSpec(
            name="broken",
            argv=["sh", "-c", "echo 'bind: address already in use'; exit 1"],
            log_path=tmp_path / "x.log",
        )
    )
    process.start()
    started = time.monotonic()
    with pytest.raises(
        StackStartError, match=r"(?s)broken exited with status 1 before S3 was ready.*address already in use"
    ) as error:
        wait_until_ready(lambda: False, what="S3", process=process, timeout_seconds=30)
    assert time.monotonic() - started < 5
    assert str(tmp_path / "x.log") in str(error.value)
    process.stop()


def test_readiness_times_out_naming_what_was_awaited(tmp_path: Path) -> None:
    process = ManagedProcess(ProcessSpec(name="slow", argv=["sleep", "300"], log_path=tmp_path / "y.log"))
    process.start()
    try:
        with pytest.raises(StackStartError, match=r"eaglenest api not ready after 0.5 s"):
            wait_until_ready(lambda: False, what="eaglenest api", process=process, timeout_seconds=0.5)
    finally:
        process.stop()
    assert os.path.exists(tmp_path / "y.log")
