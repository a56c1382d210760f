"""One guidellm process for a benchmark's runs (servebench.guidellm_process.ResidentGuidellm):
runs after the first reuse it, and a run that fails, overruns or finds the process dead
leaves nothing behind for the next one, and says why in its own log."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servebench.guidellm_process import ResidentGuidellm
from servebench.guidellm_run import guidellm_arguments, guidellm_environment, load_guidellm_report
from servebench.prompts import write_guidellm_data
from servebench.servers import RunningServer, ServerSpec, serve_in_process
from trainer.models.tiny import write_tiny_target

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_target("LlamaForCausalLM", tmp_path_factory.mktemp("target") / "target")


@pytest.fixture(scope="module")
def server(tiny_target: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    spec = ServerSpec(model_dir=tiny_target, served_model_name="tiny")
    with serve_in_process(spec, log_dir=tmp_path_factory.mktemp("logs")) as running:
        yield running


def _arguments(target: str, tokenizer: Path, tmp_path: Path, name: str) -> list[str]:
    data = tmp_path / "prompts.jsonl"
    write_guidellm_data(["Say hello.", "Count to three."], data, requests=2, output_tokens=4)
    return guidellm_arguments(
        target=target,
        model_name="tiny",
        tokenizer_dir=tokenizer,
        data_path=data,
        output_path=tmp_path / f"{name}.json",
        concurrency=[1],
        requests_per_level=2,
        max_seconds_per_level=60,
    )


def _gone(group: int) -> bool:
    """Whether no process of ``group`` is left, within a few seconds (a killed process's
    children are reaped by init a moment after they die)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_runs_share_one_process_and_a_failed_run_ends_it(
    server: RunningServer, tiny_target: Path, tmp_path: Path
) -> None:
    with ResidentGuidellm(tmp_path / "process.log", guidellm_environment()) as client:
        assert client.run(_arguments(server.url, tiny_target, tmp_path, "a"), tmp_path / "a.log", 120) == 0
        first = client.pid
        assert client.run(_arguments(server.url, tiny_target, tmp_path, "b"), tmp_path / "b.log", 120) == 0
        assert client.pid == first
        for name in ("a", "b"):  # each run measured its own level, into its own files
            assert load_guidellm_report(tmp_path / f"{name}.json")[0].successful_requests >= 1
            assert "Benchmarking complete" in (tmp_path / f"{name}.log").read_text()

        # An option guidellm does not know: the status and message of the `guidellm` command.
        assert client.run(["run", "--no-such-option"], tmp_path / "bad.log", 60) == 2
        assert "No such option '--no-such-option'" in (tmp_path / "bad.log").read_text()
        assert client.pid is None
        assert first is not None
        assert _gone(first)

        assert client.run(_arguments(server.url, tiny_target, tmp_path, "c"), tmp_path / "c.log", 120) == 0
        assert client.pid not in (None, first)
    assert (tmp_path / "process.log").read_text().count("ready") == 2


def test_a_run_past_its_time_is_killed_with_everything_it_started(tiny_target: Path, tmp_path: Path) -> None:
    # A server that accepts connections and never answers: guidellm waits on it.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        target = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with ResidentGuidellm(tmp_path / "process.log", guidellm_environment()) as client:
            # Started by a run that ends at once, so the time limit below is the hung run's alone.
            assert client.run(["--help"], tmp_path / "help.log", 60) == 0
            group = client.pid
            assert group is not None
            with pytest.raises(TimeoutError, match="guidellm ran longer than 5s"):
                client.run(_arguments(target, tiny_target, tmp_path, "hung"), tmp_path / "hung.log", 5)
            assert client.pid is None
    assert _gone(group)  # the driver, its forkserver and guidellm's worker


def test_a_process_that_dies_gives_its_status_and_output_to_the_run(tmp_path: Path) -> None:
    dies = tmp_path / "python"
    dies.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named guidellm' >&2\nexit 3\n")
    dies.chmod(0o755)
    with ResidentGuidellm(tmp_path / "process.log", python=str(dies)) as client:
        assert client.run(["run"], tmp_path / "run.log", 30) == 3
        assert client.pid is None
    assert "No module named guidellm" in (tmp_path / "run.log").read_text()


def test_the_process_runs_the_arguments_it_is_given(tmp_path: Path) -> None:
    # The request line carries the arguments as a list: spaces and JSON stay one argument each.
    backend = json.dumps({"kind": "openai_http", "target": "http://127.0.0.1:9"})
    with ResidentGuidellm(tmp_path / "process.log", python=sys.executable) as client:
        status = client.run(["run", "--backend", backend, "--no-such-option"], tmp_path / "run.log", 60)
    assert status == 2
    assert "No such option '--no-such-option'" in (tmp_path / "run.log").read_text()
