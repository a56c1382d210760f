"""A job's benchmark serves on its worker's device (EAGLENEST_DEVICE), as the job trained.

Before, the benchmark's servers (in-process and subprocess alike) always ran on the CPU: a GPU
worker trained on cuda, then measured every configuration on its CPU cores and published
those speeds, and the K chosen from them, as the job's results.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import serving.server
import trainer.device
from servebench.servers import ServerSpec, eaglenest_command, serve_in_process
from worker.stages.benchmark import _config


def _ctx(tmp_path: Path, device: str) -> Any:
    heldout = tmp_path / "heldout.jsonl"
    heldout.write_text('{"messages": []}\n')
    return SimpleNamespace(
        settings=SimpleNamespace(device=device, benchmark_overrides={}),
        knobs=SimpleNamespace(num_speculative_tokens=None),
        artifacts=SimpleNamespace(
            model=SimpleNamespace(local_dir=tmp_path / "model"),
            train=SimpleNamespace(head_dir=tmp_path / "head", heldout_path=heldout),
            base_head=None,
            data=None,
        ),
        seconds_left=lambda: None,
    )


@pytest.mark.parametrize("device", ["cuda", "auto", "cpu"])
def test_the_jobs_benchmark_runs_on_the_workers_device(tmp_path: Path, device: str) -> None:
    config, _ = _config(_ctx(tmp_path, device), tmp_path / "serving")
    assert config.device == device


def test_a_server_process_is_told_its_device() -> None:
    gpu = eaglenest_command(ServerSpec(Path("/m"), "smol", device="cuda"), 9000)
    cpu = eaglenest_command(ServerSpec(Path("/m"), "smol"), 9000)
    assert gpu[gpu.index("--device") + 1] == "cuda"
    assert "--device" not in cpu  # the CLI's default


def test_an_in_process_server_loads_on_the_specs_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpu = torch.device("cuda", 0)  # never used: start_server is a stand-in
    seen: dict[str, Any] = {}
    monkeypatch.setattr(trainer.device, "resolve_device", lambda name: gpu if name == "cuda" else None)

    @contextmanager
    def fake_start_server(*args: Any, **kwargs: Any) -> Iterator[str]:
        seen.update(kwargs)
        yield "http://127.0.0.1:1"

    monkeypatch.setattr(serving.server, "start_server", fake_start_server)
    with serve_in_process(ServerSpec(Path("/m"), "smol", device="cuda"), log_dir=tmp_path):
        pass
    assert seen["device"] == gpu
