"""Where a benchmark's ``guidellm run`` commands run: one after another in one long-lived
process (``ResidentGuidellm``), not a ``guidellm`` process each.

guidellm's imports (torch, transformers, datasets, pandas) cost several CPU-seconds a process:
on a 2-core AVX2 VM a run of two requests took 12-14 s in its own process, of which about 7 s
were imports, and under 3 s in a process that had run one before. A benchmark runs one command
per configuration (three or four), so one process for all of them saves most of that cost from
the second configuration on: the shorter the levels, the larger the share.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from types import TracebackType
from typing import IO, Protocol

from servebench.servers import signal_group

# A process asked to stop between runs exits at once; this is for one caught mid-import.
STOP_GRACE_SECONDS = 5.0


class GuidellmClient(Protocol):
    def run(self, arguments: Sequence[str], log_path: Path, timeout: float | None) -> int:
        """Run ``guidellm <arguments>``, everything it prints into ``log_path``, and return its
        exit status; raise ``TimeoutError`` (the run killed) when it takes longer than ``timeout``."""
        ...


class ResidentGuidellm:
    """Runs one after another in one process (``servebench.guidellm_driver``), started at the
    first run. A run that fails or overruns ends the process (killed with everything it
    started): the next run starts a fresh one, so a failure leaves nothing to the runs after it.
    What the process prints outside runs goes to ``process_log``."""

    def __init__(
        self, process_log: Path, environment: dict[str, str] | None = None, python: str = sys.executable
    ) -> None:
        self.process_log, self.environment, self.python = process_log, environment, python
        self._process: subprocess.Popen[bytes] | None = None
        self._log_start = 0  # where the running process's part of ``process_log`` starts

    def __enter__(self) -> ResidentGuidellm:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def run(self, arguments: Sequence[str], log_path: Path, timeout: float | None) -> int:
        process = self._started()
        assert process.stdin is not None
        assert process.stdout is not None
        request = json.dumps({"arguments": list(arguments), "log": str(log_path.resolve())}) + "\n"
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            process.stdin.write(request.encode())
            process.stdin.flush()
            reply = _read_line(process.stdout, deadline)
        except BrokenPipeError:
            reply = b""
        except TimeoutError:
            self.close()
            raise TimeoutError(f"guidellm ran longer than {timeout:.0f}s") from None
        if not reply:  # the process died: what it printed is that run's log
            status = self._ended()
            _append(log_path, self.process_log, self._log_start)
            return status or 1
        status = int(json.loads(reply)["status"])
        if status != 0:
            self.close()
        return status

    @property
    def pid(self) -> int | None:
        """The process's id while one runs (None before the first run and after a failed one)."""
        return None if self._process is None else self._process.pid

    def close(self) -> None:
        """Ends the process and whatever it started (guidellm's forkserver and workers)."""
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        with suppress(OSError):
            process.stdin.close()
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_GRACE_SECONDS)
        # The forkserver outlives the driver unless its group is ended too.
        signal_group(process.pid, signal.SIGKILL)
        process.wait()
        assert process.stdout is not None
        process.stdout.close()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            self.process_log.parent.mkdir(parents=True, exist_ok=True)
            with self.process_log.open("a") as log:
                self._log_start = log.tell()
                self._process = subprocess.Popen(
                    [self.python, "-m", "servebench.guidellm_driver"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=self.environment,
                    start_new_session=True,
                )
        return self._process

    def _ended(self) -> int:
        process = self._process
        assert process is not None
        returncode = process.wait()
        self.close()
        return returncode


def _read_line(stream: IO[bytes], deadline: float | None) -> bytes:
    """One line from ``stream`` (b"" at its end), or ``TimeoutError`` at ``deadline``."""
    line = b""
    descriptor = stream.fileno()
    while not line.endswith(b"\n"):
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError
        ready, _, _ = select.select([descriptor], [], [], remaining)
        if not ready:
            raise TimeoutError
        chunk = os.read(descriptor, 4096)
        if not chunk:
            return b""
        line += chunk
    return line


def _append(log_path: Path, process_log: Path, start: int) -> None:
    with suppress(OSError), log_path.open("ab") as log, process_log.open("rb") as printed:
        printed.seek(start)
        log.write(printed.read())
