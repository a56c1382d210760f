"""One endpoint instance: a ``python -m trainer serve`` process and what it printed.

The serving engine prints ``eaglenest serving on http://HOST:PORT`` once it accepts requests
(port 0 lets the OS pick one); until then the instance is starting. SIGTERM makes it finish
the requests it holds and exit, which is how an update drains the old instances. On a GPU it
sees only the GPU it claimed from the worker's placement (gpu_placement.py), which it holds
until it has exited.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

from worker.endpoints.gpu_placement import GpuClaim, claim_gpu
from worker.endpoints.model_files import ServedModel, weight_bytes

READY_PREFIX = "eaglenest serving on "
PR_SET_PDEATHSIG = 1
TAIL_LINES = 30


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the thread that started it dies, so a worker
    that is killed leaves no serving process behind (Linux; elsewhere the stop path alone)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class ServingProcess:
    def __init__(
        self,
        model: ServedModel,
        *,
        threads: int,
        log_path: Path,
        host: str = "127.0.0.1",
        advertised: str | None = None,
        device: str = "cpu",
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.model = model
        # Each line it prints, as it prints it (the instance's CloudWatch stream).
        self.on_line = on_line
        self.device = device
        self.threads = threads
        self.host = host
        self.advertised = advertised
        self.log_path = log_path
        self.url: str | None = None
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._process: subprocess.Popen[str] | None = None
        # The worker GPU it holds from start until it has exited; None on the CPU.
        self.gpu_claim: GpuClaim | None = None

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "trainer", "serve", "--model", str(self.model.model_dir)]
        if self.model.head_dir is not None:
            argv += ["--head", str(self.model.head_dir)]
            if self.model.num_speculative_tokens is not None:
                argv += ["--num-speculative-tokens", str(self.model.num_speculative_tokens)]
        argv += ["--threads", str(self.threads), "--device", self.device, "--host", self.host, "--port", "0"]
        return [*argv, "--served-model-name", self.model.model_name]

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # One core per thread asked for: OpenMP and MKL pools would otherwise take every core.
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads)}
        # Weighed by the weights it loads (not read for a CPU process, which claims nothing).
        self.gpu_claim = None if self.device == "cpu" else claim_gpu(self.device, weight_bytes(self.model))
        if self.gpu_claim is not None:
            # Inside the child "cuda" is then this one GPU, whatever torch's current device.
            gpu = self.gpu_claim.gpu
            env["CUDA_VISIBLE_DEVICES"] = gpu
            if self.on_line is not None:  # the instance's stream, where an operator looks first
                self.on_line(f"Placed on GPU {gpu} of this worker (CUDA_VISIBLE_DEVICES={gpu})")
        try:
            self._process = subprocess.Popen(
                self.argv(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, which is async-signal-safe
            )
        except BaseException:
            self._release_gpu()
            raise
        threading.Thread(target=self._read_output, name="endpoint-instance-output", daemon=True).start()

    def _release_gpu(self) -> None:
        if self.gpu_claim is not None:
            self.gpu_claim.release()

    def _read_output(self) -> None:
        process = self._process
        assert process is not None
        assert process.stdout is not None
        with self.log_path.open("a", encoding="utf-8") as log:
            for line in process.stdout:
                log.write(line)
                log.flush()
                self._tail.append(line.rstrip())
                if self.on_line is not None and line.strip():
                    self.on_line(line.rstrip())
                if line.startswith(READY_PREFIX):
                    url = line[len(READY_PREFIX) :].strip()
                    if self.advertised:  # http://0.0.0.0:PORT -> http://<advertised>:PORT
                        url = f"http://{self.advertised}:{url.rsplit(':', 1)[1]}"
                    self.url = url

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def exit_code(self) -> int | None:
        """None while it runs (or before it started)."""
        code = None if self._process is None else self._process.poll()
        if code is not None:
            # The fleet polls every instance: the first poll that sees the exit frees its GPU,
            # before a crashed instance's replacement claims one.
            self._release_gpu()
        return code

    def failure(self) -> str:
        """Why it ended, in a line: the exit code and the last lines it printed."""
        lines = [line for line in self._tail if line.strip()]
        last = " | ".join(lines[-3:]) if lines else "no output"
        return f"serving process exited with code {self.exit_code()}: {last}"

    def terminate(self) -> None:
        """SIGTERM: it stops accepting, finishes the requests it holds, then exits."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)

    def wait_stopped(self, timeout_seconds: float = 60.0) -> None:
        """Wait for the exit SIGTERM asked for; SIGKILL after ``timeout_seconds``."""
        process = self._process
        if process is None:
            return
        try:
            process.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self._release_gpu()

    def stop(self, timeout_seconds: float = 60.0) -> None:
        self.terminate()
        self.wait_stopped(timeout_seconds)
