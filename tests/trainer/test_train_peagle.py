"""``trainer.train.train`` with ``variant="peagle"``: trains, checkpoints, resumes exactly, exports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from engine.heads.export import load_head
from engine.heads.peagle import PEagleDraftModel
from tests.trainer.eagle.tiny_data import write_chat_data
from tests.trainer.test_train import config, metrics
from trainer.eagle.reporting import TrainProgress
from trainer.train import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_chat_data(tmp_path_factory.mktemp("data") / "chat.jsonl", conversations=40)


def test_a_peagle_run_resumes_exactly_and_exports_a_peagle_head(
    tiny_llama_dir: Path, tmp_path: Path, data: Path
) -> None:
    settings = {"variant": "peagle", "max_steps": 12, "ttt_steps": 4, "peagle_keep_ratio": 0.7}
    straight = train(config(tiny_llama_dir, data, tmp_path / "straight", **settings))
    steps_seen: list[int] = []

    def record(event: TrainProgress) -> None:
        if event.stage == "training":
            steps_seen.append(event.step)

    stopped = train(
        config(tiny_llama_dir, data, tmp_path / "resumed", **settings),
        progress=record,
        should_stop=lambda: len(steps_seen) >= 5,
    )
    assert stopped.training.stopped
    resumed = train(config(tiny_llama_dir, data, tmp_path / "resumed", **settings))
    assert resumed.training.resumed_from_step == 5

    assert straight.files.head_dir is not None
    assert resumed.files.head_dir is not None
    a = load_file(str(Path(straight.files.head_dir) / "model.safetensors"))
    b = load_file(str(Path(resumed.files.head_dir) / "model.safetensors"))
    assert "mask_hidden" in a
    for name in a:
        assert torch.equal(a[name], b[name]), name
    rows = metrics(tmp_path / "straight")
    assert [r["loss"] for r in rows] == [r["loss"] for r in metrics(tmp_path / "resumed")]
    # Four depths trained; drop-token sampling trains fewer positions at each deeper one.
    assert len(rows[-1]["step_accuracy"]) == 4
    exported = json.loads((Path(straight.files.head_dir) / "config.json").read_text())
    assert exported["architectures"] == ["PeagleLlamaForCausalLM"]
    assert exported["eaglenest"]["speculative_tokens"]["trained"] == 4
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    target = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    assert isinstance(load_head(straight.files.head_dir, target), PEagleDraftModel)


def test_an_eagle3_head_cannot_be_fine_tuned_as_peagle(
    tiny_llama_dir: Path, tmp_path: Path, data: Path
) -> None:
    eagle3 = train(config(tiny_llama_dir, data, tmp_path / "eagle3", max_steps=2))
    assert eagle3.files.head_dir is not None
    with pytest.raises(ValueError, match="is a eagle3 head, this run trains peagle"):
        train(
            config(
                tiny_llama_dir,
                data,
                tmp_path / "peagle",
                variant="peagle",
                max_steps=2,
                init_head_dir=Path(eagle3.files.head_dir),
            )
        )


def test_a_peagle_run_refuses_several_processes(tiny_llama_dir: Path, tmp_path: Path, data: Path) -> None:
    # Its drop-token loss is normalised per process; split across ranks it would not be the global loss.
    with pytest.raises(ValueError, match="variant peagle trains in one process"):
        config(tiny_llama_dir, data, tmp_path / "run", variant="peagle", nproc=2)
