"""``device: auto|cpu|cuda`` in the trainer, the engine's eval command and serving, on a CPU machine."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from serving.server import load_engine
from tests.trainer.eagle.tiny_data import write_chat_data
from trainer.cli import USAGE_ERROR, main
from trainer.config import TrainConfig
from trainer.device import device_type, model_dtype, resolve_device
from trainer.train import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

without_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")


def test_cpu_is_the_cpu_and_auto_is_the_gpu_only_when_there_is_one() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match=r"^device must be one of auto, cpu, cuda, got 'tpu'$"):
        resolve_device("tpu")


def test_the_device_a_name_runs_on_here_needs_no_gpu_to_be_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert (device_type("cuda"), device_type("auto"), device_type("cpu")) == ("cuda", "cpu", "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert (device_type("auto"), device_type("cpu")) == ("cuda", "cpu")


@without_gpu
def test_cuda_without_a_gpu_is_a_clear_error() -> None:
    with pytest.raises(
        ValueError, match=r"^device cuda: torch .* sees no CUDA GPU .*; use device cpu or auto$"
    ):
        resolve_device("cuda")


def test_cpu_models_stay_float32_unless_asked() -> None:
    assert model_dtype(torch.device("cpu")) == torch.float32
    assert model_dtype(torch.device("cpu"), "bfloat16") == torch.bfloat16
    with pytest.raises(ValueError, match="dtype 'float99' is not a torch dtype"):
        model_dtype(torch.device("cpu"), "float99")


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_training_runs_on_cpu_and_auto(tiny_llama_dir: Path, tmp_path: Path, device: str) -> None:
    data = write_chat_data(tmp_path / "chat.jsonl", conversations=8)
    config = TrainConfig(
        model_dir=tiny_llama_dir,
        data_paths=[data],
        out_dir=tmp_path / "run",
        max_steps=2,
        eval_fraction=0.0,
        compute_dtype="float32",
        regenerate=False,
        device=device,
    )
    result = train(config)
    assert result.training.steps == 2
    assert result.files.head_dir is not None


@without_gpu
def test_the_commands_refuse_cuda_without_a_gpu(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_chat_data(tmp_path / "chat.jsonl", conversations=4)
    train_args = [
        "train",
        "--model",
        str(tiny_llama_dir),
        "--data",
        str(data),
        "--out",
        str(tmp_path / "run"),
    ]
    head = tmp_path / "head"
    head.mkdir()
    (head / "config.json").write_text("{}")
    commands = [
        [*train_args, "--device", "cuda", "--max-steps", "1"],
        ["serve", "--model", str(tiny_llama_dir), "--device", "cuda", "--port", "0"],
        [
            "eval",
            "--model",
            str(tiny_llama_dir),
            "--head",
            str(head),
            "--prompts",
            str(data),
            "--device",
            "cuda",
        ],
    ]
    for command in commands:
        assert main(command) == USAGE_ERROR, command[0]
        assert "error: device cuda: torch" in capsys.readouterr().err, command[0]


def test_serving_loads_on_the_resolved_device(tiny_llama_dir: Path) -> None:
    engine = load_engine(tiny_llama_dir, device=resolve_device("auto"))
    try:
        assert engine.device == resolve_device("auto")
        assert engine.target.model.dtype == model_dtype(engine.device)
    finally:
        engine.close()
