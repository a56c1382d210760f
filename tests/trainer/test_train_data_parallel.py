"""``train`` with ``nproc=2``: two CPU processes (gloo) against one, on a tiny target."""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch
from safetensors.torch import load_file

from tests.trainer.eagle.tiny_data import write_chat_data
from trainer import train as trainer_train
from trainer.config import TrainConfig
from trainer.eagle import process_group
from trainer.eagle.batching import plan_batches
from trainer.eagle.prepared import data_fingerprint, load_prepared
from trainer.eagle.process_group import CONFIG_FILE, STORE_FILE
from trainer.eagle.rank_watch import RankWatch
from trainer.eagle.reporting import TrainProgress
from trainer.train import share_cores, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_chat_data(tmp_path_factory.mktemp("data") / "chat.jsonl", conversations=30)
    # Conversations longer than half of batch_tokens: batches of one row, which leave the
    # other rank without rows to train on (or to evaluate).
    with path.open("a", encoding="utf-8") as handle:
        for index in range(3):
            answer = " ".join(f"word{(index + k) % 7}" for k in range(50 + index))
            turns = [
                {"from": "human", "value": f"tell me a long story {index}"},
                {"from": "gpt", "value": answer},
            ]
            handle.write(json.dumps({"conversations": turns}) + "\n")
    return path


def config(model_dir: Path, data: Path, out_dir: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = {
        "model_dir": model_dir,
        "data_paths": [data],
        "out_dir": out_dir,
        "batch_tokens": 512,
        # Batches of at most 3 rows: 2 and 1 per rank.
        "max_batch_size": 3,
        "ttt_steps": 2,
        "lr": 3e-3,
        "warmup_steps": 2,
        "checkpoint_every": 5,
        "eval_fraction": 0.15,
        "holdout_fraction": 0.0,
        "regenerate": False,  # training is under test, not distillation
        # Float comparisons need float kernels and float features (bf16 rounds differently
        # where a rank's rows are padded to another length).
        "compute_dtype": "float32",
        "feature_dtype": "float32",
        "num_threads": 1,
        **overrides,
    }
    return TrainConfig(**settings)


def metrics(out_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]


def test_two_processes_train_the_loss_curve_of_one(tiny_llama_dir: Path, data: Path, tmp_path: Path) -> None:
    one = train(config(tiny_llama_dir, data, tmp_path / "one", max_steps=12))
    two = train(config(tiny_llama_dir, data, tmp_path / "two", max_steps=12, nproc=2))

    prepared = load_prepared(
        tmp_path / "two", data_fingerprint(config(tiny_llama_dir, data, tmp_path / "two"))
    )
    assert prepared is not None
    for samples in (prepared.train, prepared.eval):
        lengths = [len(sample.input_ids) for sample in samples]
        rows = {len(b.sample_indices) for b in plan_batches(lengths, batch_tokens=512, max_batch_size=3)}
        assert 1 in rows  # a batch that leaves rank 1 without rows

    a, b = metrics(tmp_path / "one"), metrics(tmp_path / "two")
    assert len(a) == len(b) == 12
    for row_one, row_two in zip(a, b, strict=True):
        assert row_two["tokens"] == row_one["tokens"]
        assert row_two["masked_tokens"] == row_one["masked_tokens"]
        assert row_two["loss"] == pytest.approx(row_one["loss"], rel=1e-4)
        assert row_two["step_accuracy"] == pytest.approx(row_one["step_accuracy"], abs=1e-6)
        assert row_two["grad_norm"] == pytest.approx(row_one["grad_norm"], rel=1e-3)
    assert one.evaluation.best_eval is not None
    assert two.evaluation.best_eval is not None
    assert two.evaluation.best_eval.loss == pytest.approx(one.evaluation.best_eval.loss, rel=1e-4)
    assert two.evaluation.best_eval.masked_tokens == one.evaluation.best_eval.masked_tokens
    assert two.training.steps == 12
    assert two.timing.tokens_trained == one.timing.tokens_trained

    # Rank 0 alone wrote the head, and the ranks' meeting files are gone.
    assert one.files.head_dir is not None
    assert two.files.head_dir is not None
    head_one = load_file(str(Path(one.files.head_dir) / "model.safetensors"))
    head_two = load_file(str(Path(two.files.head_dir) / "model.safetensors"))
    for name, tensor in head_one.items():
        assert head_two[name].float().sub(tensor.float()).abs().max() < 1e-3, name
    assert not (tmp_path / "two" / STORE_FILE).exists()
    assert not (tmp_path / "two" / CONFIG_FILE).exists()


def test_two_processes_resume_exactly(tiny_llama_dir: Path, data: Path, tmp_path: Path) -> None:
    straight = train(config(tiny_llama_dir, data, tmp_path / "straight", max_steps=10, nproc=2))
    steps_seen: list[int] = []

    def record(event: TrainProgress) -> None:
        if event.stage == "training":
            steps_seen.append(event.step)

    stopped = train(
        config(tiny_llama_dir, data, tmp_path / "resumed", max_steps=10, nproc=2),
        progress=record,
        should_stop=lambda: len(steps_seen) >= 4,
    )
    assert stopped.training.stop_reason == "stop_requested"
    assert stopped.training.steps == 4
    resumed = train(config(tiny_llama_dir, data, tmp_path / "resumed", max_steps=10, nproc=2))
    assert resumed.training.resumed_from_step == 4
    assert resumed.training.steps == 10
    assert [r["loss"] for r in metrics(tmp_path / "resumed")] == [
        r["loss"] for r in metrics(tmp_path / "straight")
    ]
    assert straight.files.head_dir is not None
    assert resumed.files.head_dir is not None
    a = load_file(str(Path(straight.files.head_dir) / "model.safetensors"))
    b = load_file(str(Path(resumed.files.head_dir) / "model.safetensors"))
    for name in a:
        assert a[name].equal(b[name]), name


def test_the_time_budget_stops_every_rank_together(tiny_llama_dir: Path, data: Path, tmp_path: Path) -> None:
    budget_minutes = 0.2
    result = train(
        config(
            tiny_llama_dir,
            data,
            tmp_path / "run",
            epochs=10_000,
            nproc=2,
            time_budget_minutes=budget_minutes,
            budget_clock="cpu",
        )
    )
    # train() returns only once the helper rank left the group with rank 0 and exited with 0.
    assert result.training.stop_reason == "time_budget"
    assert result.timing.seconds < budget_minutes * 60 + 10
    rows = metrics(tmp_path / "run")
    assert len(rows) == result.training.steps > 5
    assert result.files.head_dir is not None


def test_a_rank_that_dies_fails_the_run(
    tiny_llama_dir: Path,
    data: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Rank 0's watch polls fast enough to see the exit before gloo's failed collective ends
    # the run (on gloo it only logs; tests/trainer/test_rank_watch.py covers NCCL's abort).
    monkeypatch.setattr(process_group, "RankWatch", functools.partial(RankWatch, poll_seconds=0.05))
    caplog.set_level(logging.ERROR, logger="trainer.eagle.rank_watch")

    def kill_the_helper(event: TrainProgress) -> None:
        if event.stage == "training" and event.step == 2:
            (helper,) = [
                child
                for child in psutil.Process().children()
                if "trainer.helper_rank" in " ".join(child.cmdline())
            ]
            helper.kill()

    began = time.monotonic()
    with pytest.raises(
        RuntimeError, match=r"^data-parallel rank 1 \(pid \d+\) exited with -9 during training"
    ):
        train(config(tiny_llama_dir, data, tmp_path / "run", max_steps=50, nproc=2), progress=kill_the_helper)
    assert time.monotonic() - began < 120  # the next collective fails, not a 10-minute timeout
    assert re.search(
        r"data-parallel rank 1 \(pid \d+\) exited with -9 while rank 0 is in the group", caplog.text
    )
    assert not [c for c in psutil.Process().children() if "trainer.helper_rank" in " ".join(c.cmdline())]


def test_a_rank_that_hangs_fails_the_run_in_the_stall_limit_not_the_collective_timeout(
    tiny_llama_dir: Path, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stopped helper neither exits nor answers: gloo, like NCCL, would wait 10 minutes for it.
    # 5 s: longer than any wait of a tiny step's collective on a loaded 2-core machine.
    stall = 5.0
    monkeypatch.setattr(
        process_group, "RankWatch", functools.partial(RankWatch, poll_seconds=0.05, stall_seconds=stall)
    )
    stopped: list[psutil.Process] = []

    def stop_the_helper(event: TrainProgress) -> None:
        if event.stage == "training" and event.step == 2 and not stopped:
            stopped.extend(
                child
                for child in psutil.Process().children()
                if "trainer.helper_rank" in " ".join(child.cmdline())
            )
            stopped[0].suspend()

    began = time.monotonic()
    # Stopped before or after it entered rank 0's next collective: either way the run is hung.
    with pytest.raises(
        RuntimeError,
        match=r"^(data-parallel rank 1 \(pid \d+\) did not reach collective \d+|collective \d+ did not "
        r"complete) in \d+ s .*",
    ):
        train(config(tiny_llama_dir, data, tmp_path / "run", max_steps=50, nproc=2), progress=stop_the_helper)
    assert time.monotonic() - began < stall + 60
    assert stopped, "the run ended before its helper was stopped"
    assert not stopped[0].is_running() or stopped[0].status() == psutil.STATUS_ZOMBIE
    assert not [c for c in psutil.Process().children() if "trainer.helper_rank" in " ".join(c.cmdline())]
    assert not list((tmp_path / "run").glob(".process-group-store*"))  # the counts cleaned up too


def test_ranks_without_a_thread_count_share_the_cores(
    tiny_llama_dir: Path, data: Path, tmp_path: Path
) -> None:
    torch.set_num_threads(2)  # one_torch_thread restores the count after the test
    share_cores(config(tiny_llama_dir, data, tmp_path, nproc=2, num_threads=None))
    assert torch.get_num_threads() == 1
    torch.set_num_threads(2)
    share_cores(config(tiny_llama_dir, data, tmp_path, nproc=2, num_threads=2))
    assert torch.get_num_threads() == 2  # an explicit count per process is kept


def test_more_ranks_than_gpus_fail_before_the_target_distils(
    tiny_llama_dir: Path, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker with one GPU asked for two ranks: the run fails before it loads the target, not
    after distilling (hours on a GPU) once the group is formed. One visible GPU is simulated."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(trainer_train, "resolve_device", lambda _name: torch.device("cuda", 0))

    def load_target_timed(_run: object) -> None:
        raise AssertionError("the target was loaded (and would have distilled) before the GPUs were counted")

    monkeypatch.setattr(trainer_train, "load_target_timed", load_target_timed)
    with pytest.raises(ValueError, match=r"^nproc 2 on CUDA needs one GPU per process; 1 visible$"):
        train(config(tiny_llama_dir, data, tmp_path / "run", nproc=2, device="cuda"))
