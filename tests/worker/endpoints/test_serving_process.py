"""The command line of an endpoint instance's serving process."""

from __future__ import annotations

from pathlib import Path

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
