"""An endpoint instance's serving process: its command line, and the GPU its child sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.worker.endpoints.echo_gpu import VISIBLE_PREFIX, EchoGpuProcess, wait_for_child
from worker.endpoints import gpu_placement
from worker.endpoints.gpu_placement import GpuPlacement
from worker.endpoints.model_files import ServedModel
from worker.endpoints.serving_process import ServingProcess


def test_the_workers_device_reaches_the_serving_command(tmp_path: Path) -> None:
    model = ServedModel(
        model_name="m", model_dir=tmp_path / "model", head_dir=None, num_speculative_tokens=None
    )
    default = ServingProcess(model, threads=1, log_path=tmp_path / "log").argv()
    assert default[default.index("--device") + 1] == "cpu"
    on_gpu = ServingProcess(model, threads=1, log_path=tmp_path / "log", device="cuda").argv()
    assert on_gpu[on_gpu.index("--device") + 1] == "cuda"
    assert on_gpu[on_gpu.index("--threads") + 1] == "1"


def _visible(lines: list[str]) -> str | None:
    """What the child printed for CUDA_VISIBLE_DEVICES, once it has."""
    return next((line[len(VISIBLE_PREFIX) :] for line in lines if line.startswith(VISIBLE_PREFIX)), None)


def test_two_cuda_instances_on_a_two_gpu_worker_each_see_their_own_gpu(
    tmp_path: Path, two_gpu_worker: GpuPlacement
) -> None:
    lines: tuple[list[str], list[str]] = ([], [])
    first = EchoGpuProcess(tmp_path, "first", device="cuda", on_line=lines[0].append)
    second = EchoGpuProcess(tmp_path, "second", device="cuda", on_line=lines[1].append)
    first.start()
    second.start()
    try:
        wait_for_child(lambda: all(_visible(stream) is not None for stream in lines))
        assert first.exit_code() is None
        assert second.exit_code() is None
        assert (_visible(lines[0]), _visible(lines[1])) == ("0", "1")
        assert lines[1][0] == "Placed on GPU 1 of this worker (CUDA_VISIBLE_DEVICES=1)"
        assert two_gpu_worker.running() == {"0": 1, "1": 1}
    finally:
        first.stop()
        second.stop()
    assert two_gpu_worker.running() == {"0": 0, "1": 0}


def test_a_crashed_instance_frees_its_gpu_for_its_replacement(
    tmp_path: Path, two_gpu_worker: GpuPlacement
) -> None:
    lines: list[str] = []
    steady = EchoGpuProcess(tmp_path, "steady", device="cuda")
    crashing = EchoGpuProcess(tmp_path, "crashing", device="cuda", exit_code=1, on_line=lines.append)
    steady.start()
    crashing.start()
    try:
        wait_for_child(lambda: crashing.exit_code() is not None)
        # Seen exited (as the fleet's poll sees it): GPU 1 is free again, and a replacement takes it.
        assert two_gpu_worker.running() == {"0": 1, "1": 0}
        replacement = EchoGpuProcess(tmp_path, "replacement", device="cuda", on_line=lines.append)
        replacement.start()
        assert replacement.gpu_claim is not None
        assert replacement.gpu_claim.gpu == "1"
        replacement.stop()
    finally:
        steady.stop()
        crashing.stop()
    assert two_gpu_worker.running() == {"0": 0, "1": 0}


def test_a_cpu_instance_claims_no_gpu_and_keeps_the_workers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_gpus_for_cpu() -> GpuPlacement:
        raise AssertionError("a cpu instance must not look for GPUs")

    monkeypatch.setattr(gpu_placement, "worker_placement", no_gpus_for_cpu)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,6")
    lines: list[str] = []
    process = EchoGpuProcess(tmp_path, "cpu", device="cpu", exit_code=0, on_line=lines.append)
    process.start()
    wait_for_child(lambda: process.exit_code() is not None and _visible(lines) is not None)
    process.stop()
    assert process.gpu_claim is None
    assert _visible(lines) == "5,6"
    assert not any(line.startswith("Placed on GPU") for line in lines)


def test_an_instance_claims_its_gpu_weighed_by_the_weights_it_loads(
    tmp_path: Path, two_gpu_worker: GpuPlacement
) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.safetensors").write_bytes(b"x" * 1234)
    lines: list[str] = []
    instance = EchoGpuProcess(tmp_path, "weighed", device="cuda", on_line=lines.append)
    instance.start()
    try:
        wait_for_child(lambda: _visible(lines) is not None)
        assert two_gpu_worker.weight_bytes() == {"0": 1234, "1": 0}
    finally:
        instance.stop()
    assert two_gpu_worker.weight_bytes() == {"0": 0, "1": 0}
