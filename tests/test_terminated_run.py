"""A terminated test run tears its fixtures down (tests/fixtures/termination.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A fixture that starts a process in a session of its own, as the stack fixtures do, and a
# test that outlives any patience: only the fixture's teardown can stop that process.
INNER_TEST = textwrap.dedent(
    """
    import os
    import subprocess
    import time
    from pathlib import Path

    import pytest


    @pytest.fixture
    def detached_child():
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        Path(os.environ["CHILD_PID_FILE"]).write_text(str(child.pid))
        yield
        child.terminate()
        child.wait()


    def test_runs_until_terminated(detached_child):
        time.sleep(300)
    """
)


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_terminated_run_stops_the_processes_its_fixtures_started(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    pid_file = tmp_path / "child.pid"
    env = {**os.environ, "CHILD_PID_FILE": str(pid_file), "PYTHONPATH": str(ROOT)}
    plugin = ["-p", "tests.fixtures.termination"]
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    child_pid = None
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert run.poll() is None, run.communicate()[0].decode()
            assert time.monotonic() < deadline, "the inner test never started its child"
            time.sleep(0.1)
        child_pid = int(pid_file.read_text())
        assert process_exists(child_pid)

        run.send_signal(signal.SIGTERM)
        output = run.communicate(timeout=60)[0].decode()

        assert not process_exists(child_pid), f"the fixture's child outlived the run:\n{output}"
        assert run.returncode != 0  # an interrupted run is not a passing one
    finally:
        if run.poll() is None:
            run.kill()
        if child_pid is not None and process_exists(child_pid):
            os.kill(child_pid, signal.SIGKILL)
