"""A fleet's crash and restart path gives each crashed instance's GPU back before its replacement
takes one, so restarts never pile claims onto the worker's GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.worker.endpoints.echo_gpu import EchoGpuProcess, unused_model, wait_for_child
from worker.endpoints import fleet as fleet_module
from worker.endpoints.fleet import Fleet
from worker.endpoints.gpu_placement import GpuPlacement
from worker.endpoints.model_files import EndpointFailedError
from worker.endpoints.serving_process import ServingProcess


class _Stream:
    """An instance's log stream, kept in memory (the real one writes to the database)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, message: str) -> None:
        self.lines.append(message)

    def flush(self) -> None:
        return None


def _crashing_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fleet:
    """Two cuda instances whose children crash at once; statuses and logs stay in memory."""

    def streams(endpoint_id: int, generation: int, variant_name: str, count: int) -> list[_Stream]:
        return [_Stream() for _ in range(count)]

    def report(fleet: Fleet, ordinal: int, status: str, url: str | None, message: str, **_: bool) -> None:
        fleet.logs[ordinal].write(f"[{status}] {message}")

    def crashing(fleet: Fleet, ordinal: int) -> ServingProcess:
        return EchoGpuProcess(
            tmp_path,
            f"instance-{ordinal}",
            device=fleet.device,
            exit_code=1,
            on_line=fleet.logs[ordinal].write,
        )

    monkeypatch.setattr(fleet_module, "instance_log_buffers", streams)
    monkeypatch.setattr(Fleet, "_report", report)
    monkeypatch.setattr(Fleet, "_new_process", crashing)
    monkeypatch.setattr(fleet_module, "RESTART_DELAY_SECONDS", 0.0)
    return Fleet(
        endpoint_id=1,
        generation=1,
        variant_name="v",
        count=2,
        model=unused_model(tmp_path),
        threads=1,
        log_dir=tmp_path,
        device="cuda",
    )


def test_restarted_instances_hold_one_gpu_each_and_a_failed_rollout_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_gpu_worker: GpuPlacement
) -> None:
    fleet = _crashing_fleet(tmp_path, monkeypatch)
    fleet.start()
    try:
        assert two_gpu_worker.running() == {"0": 1, "1": 1}
        wait_for_child(lambda: all(process.exit_code() is not None for process in fleet.processes))
        fleet.poll()  # both crashed before serving: each is started again
        assert two_gpu_worker.running() == {"0": 1, "1": 1}
        wait_for_child(lambda: all(process.exit_code() is not None for process in fleet.processes))
        with pytest.raises(EndpointFailedError):
            fleet.poll()  # the second crash fails the rollout
    finally:
        fleet.stop()
    assert two_gpu_worker.running() == {"0": 0, "1": 0}
