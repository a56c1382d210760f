"""A step that leaves the device unable to run anything more (on a GPU, a sticky CUDA error: an
illegal memory access, a device-side assert) stops the server for good: the batch fails, /health
and every later request answer 503, and `trainer serve` exits non-zero so that an endpoint's
supervisor replaces the process. Before, the engine went on failing every step while /health
said ok. An ordinary failed step (the device still usable) fails its batch and serving goes on."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from engine.device_health import device_fault
from serving import GenerationRequest, ServingEngine, serve_cli, server
from serving import engine as serving_engine
from tests.speculative.engine_doubles import tiny_target
from trainer.models.tiny import write_tiny_target

STICKY = "AcceleratorError: CUDA error: an illegal memory access was encountered"


def test_a_sync_names_a_gpus_sticky_error_and_a_cpu_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = torch.device("cuda", 0)
    synced: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "synchronize", synced.append)
    assert device_fault(cuda) is None
    assert synced == [cuda]

    def broken(device: torch.device) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "synchronize", broken)
    assert device_fault(cuda) == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert device_fault(torch.device("cpu")) is None


def _fail_next_step(engine: ServingEngine) -> None:
    def failing_step() -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    engine._step = failing_step  # type: ignore[method-assign]


def test_an_ordinary_failed_step_fails_its_batch_and_serving_goes_on() -> None:
    with ServingEngine(tiny_target("LlamaForCausalLM"), eos_token_ids=[]) as engine:
        step = engine._step
        _fail_next_step(engine)
        failed = engine.submit(GenerationRequest([5, 17, 30], 4, ignore_eos=True))
        with pytest.raises(RuntimeError, match="illegal memory access"):
            failed.wait(60)
        engine._step = step  # type: ignore[method-assign]
        assert engine.device_failure is None
        assert len(engine.generate(GenerationRequest([5, 17, 30], 4, ignore_eos=True), timeout=60)) == 4


def test_a_failed_device_stops_the_engine_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serving_engine, "device_fault", lambda device: STICKY)
    told: list[str] = []
    engine = ServingEngine(tiny_target("LlamaForCausalLM"), eos_token_ids=[], on_device_failure=told.append)
    try:
        _fail_next_step(engine)
        failed = engine.submit(GenerationRequest([5, 17, 30], 4, ignore_eos=True))
        with pytest.raises(RuntimeError, match="illegal memory access"):
            failed.wait(60)
        engine._thread.join(10)
        assert not engine._thread.is_alive()
        assert engine.device_failure is not None
        assert STICKY in engine.device_failure
        assert told == [engine.device_failure]
        with pytest.raises(RuntimeError, match="runs nothing more"):
            engine.submit(GenerationRequest([5, 17, 30], 4))
    finally:
        engine.close()


def test_the_server_answers_503_once_its_device_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_dir = write_tiny_target("LlamaForCausalLM", tmp_path / "tiny-llama", seed=3)
    monkeypatch.setattr(serving_engine, "device_fault", lambda device: STICKY)
    load_engine = server.load_engine
    engines: list[ServingEngine] = []

    def failing_once_loaded(*args: Any, **kwargs: Any) -> ServingEngine:
        engines.append(load_engine(*args, **kwargs))
        _fail_next_step(engines[0])
        return engines[0]

    monkeypatch.setattr(server, "load_engine", failing_once_loaded)
    told: list[str] = []
    with (
        server.start_server(model_dir, served_model_name="tiny", on_device_failure=told.append) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        assert client.get("/health").json() == {"status": "ok"}
        body = {"model": "tiny", "prompt": [5, 17, 30], "max_tokens": 4, "temperature": 0}
        assert client.post("/v1/completions", json=body).status_code == 500  # the failed step's batch
        health = client.get("/health")
        assert health.status_code == 503
        assert health.json() == {"status": "failed", "error": engines[0].device_failure}
        refused = client.post("/v1/completions", json=body)
        assert refused.status_code == 503
        assert STICKY in refused.json()["error"]["message"]
    assert len(told) == 1


def test_trainer_serve_exits_non_zero_when_its_device_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model_dir = write_tiny_target("LlamaForCausalLM", tmp_path / "tiny-llama", seed=3)
    monkeypatch.setattr(serving_engine, "device_fault", lambda device: STICKY)
    load_engine = server.load_engine

    def failing_with_a_request(*args: Any, **kwargs: Any) -> ServingEngine:
        engine = load_engine(*args, **kwargs)
        _fail_next_step(engine)
        engine.submit(GenerationRequest([5, 17, 30], 4))  # a client's request, the step it fails
        return engine

    monkeypatch.setattr(server, "load_engine", failing_with_a_request)
    # Its SIGTERM/SIGINT handlers would outlive the test in pytest's process.
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    args = argparse.Namespace(
        model=model_dir,
        head=None,
        num_speculative_tokens=None,
        adaptive=False,
        max_batch_size=2,
        device="cpu",
        threads=None,
        host="127.0.0.1",
        port=0,
        served_model_name="tiny",
    )
    assert serve_cli.run_serve(args) == 1
    assert "runs nothing more" in capsys.readouterr().err
