"""How the benchmark runs guidellm when guidellm fails: the cause named first, and a run whose
level measured nothing (guidellm 0.8.1 then crashes, every level lost) run again once."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from guidellm.benchmark.schemas import metrics as guidellm_metrics

from servebench.guidellm_run import NOTHING_MEASURED, GuidellmError, run_guidellm

# The last lines guidellm 0.8.1 printed when a level's time limit ran out before its first request
# (reproduced by delaying its data loader past the limit).
NOTHING_MEASURED_TAIL = f"""\
  File "guidellm/benchmark/schemas/benchmark.py", line 157, in compile
    metrics = GenerativeMetrics.compile(accumulator)
              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "guidellm/benchmark/schemas/metrics.py", line 1250, in compile
    raise ValueError(
ValueError: Cannot compile GenerativeMetrics: {NOTHING_MEASURED}.
/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: leaked
  warnings.warn('resource_tracker: There appear to be %d '
"""


class _StandIn:
    """A guidellm client that runs a script instead of guidellm, a process a run."""

    def __init__(self, script: Path) -> None:
        self.script = script

    def run(self, arguments: Sequence[str], log_path: Path, timeout: float | None) -> int:
        with log_path.open("w") as log:
            command = [sys.executable, str(self.script), *arguments]
            return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode


def _stand_in(tmp_path: Path, failures: list[str]) -> _StandIn:
    """A command standing in for guidellm: run i prints failures[i] and exits 1, then succeeds."""
    script = tmp_path / "stand_in.py"
    script.write_text(
        "import json, sys\n"
        "from pathlib import Path\n"
        f"counter = Path({str(tmp_path / 'runs')!r})\n"
        "runs = int(counter.read_text()) if counter.exists() else 0\n"
        "counter.write_text(str(runs + 1))\n"
        f"failures = json.loads({json.dumps(failures)!r})\n"
        "if runs < len(failures):\n"
        "    print(failures[runs])\n"
        "    sys.exit(1)\n"
        "print('Benchmarking complete')\n"
    )
    return _StandIn(script)


def _runs(tmp_path: Path) -> int:
    return int((tmp_path / "runs").read_text())


def test_the_signature_is_the_message_of_the_installed_guidellm() -> None:
    # A guidellm upgrade that rewords the error must fail here, not silently stop the retry.
    assert NOTHING_MEASURED in inspect.getsource(guidellm_metrics.GenerativeMetrics.compile)


def test_a_run_whose_level_measured_nothing_runs_again_and_keeps_the_failed_log(tmp_path: Path) -> None:
    log = tmp_path / "guidellm-plain.log"
    run_guidellm([], log, client=_stand_in(tmp_path, [NOTHING_MEASURED_TAIL]))

    assert _runs(tmp_path) == 2
    assert "Benchmarking complete" in log.read_text()
    assert NOTHING_MEASURED in (tmp_path / "guidellm-plain-attempt-1.log").read_text()


def test_a_second_run_that_measures_nothing_fails_naming_the_cause_first(tmp_path: Path) -> None:
    log = tmp_path / "guidellm-plain.log"
    with pytest.raises(GuidellmError) as raised:
        run_guidellm([], log, client=_stand_in(tmp_path, [NOTHING_MEASURED_TAIL, NOTHING_MEASURED_TAIL]))

    assert _runs(tmp_path) == 2
    first_line = str(raised.value).splitlines()[0]
    assert first_line == (
        f"guidellm exited with status 1: ValueError: Cannot compile GenerativeMetrics: {NOTHING_MEASURED}."
    )
    # The cause survives the 1,024 characters a job's FailureReason keeps.
    assert NOTHING_MEASURED in f"Benchmark failed: {raised.value}"[:1024]


def test_any_other_failure_is_not_run_again(tmp_path: Path) -> None:
    log = tmp_path / "guidellm-plain.log"
    tail = 'Traceback (most recent call last):\n  File "x.py", line 1\nhttpx.ConnectError: refused'
    with pytest.raises(GuidellmError, match=r"^guidellm exited with status 1: httpx.ConnectError: refused"):
        run_guidellm([], log, client=_stand_in(tmp_path, [tail, tail]))

    assert _runs(tmp_path) == 1
    assert not (tmp_path / "guidellm-plain-attempt-1.log").exists()
