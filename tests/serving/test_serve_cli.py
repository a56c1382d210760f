"""``python -m trainer serve``: flags, refusals, and the ready line on a real server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from trainer.cli import USAGE_ERROR, main
from trainer.models.tiny import write_tiny_target


def test_k_and_adaptive_are_exclusive() -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--model", "m", "--num-speculative-tokens", "3", "--adaptive"])


def test_speculation_without_head_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--model", str(tmp_path), "--num-speculative-tokens", "3"]) == USAGE_ERROR
    assert "needs a draft head" in capsys.readouterr().err
    assert main(["serve", "--model", str(tmp_path / "missing")]) == USAGE_ERROR
    assert "does not exist" in capsys.readouterr().err


def test_serve_prints_the_ready_line_and_answers(tmp_path: Path) -> None:
    model_dir = write_tiny_target("LlamaForCausalLM", tmp_path / "tiny")
    command = [sys.executable, "-m", "trainer", "serve", "--model", str(model_dir), "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as server:
        try:
            assert server.stdout is not None
            line = server.stdout.readline().strip()
            assert line.startswith("eaglenest serving on http://127.0.0.1:")
            url = line.removeprefix("eaglenest serving on ")
            models = httpx.get(f"{url}/v1/models", timeout=30).json()
            assert models["data"][0]["id"] == "tiny"  # the model directory's name
        finally:
            server.terminate()
            assert server.wait(timeout=30) == 0
