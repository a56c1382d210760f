"""``trainer.train.train`` end to end on tiny targets of every architecture, plus one real run."""

from __future__ import annotations

import itertools
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM

from engine.heads.export import RUN_HEAD_DIRNAME
from engine.heads.serving_settings import recorded_speculative_tokens, served_speculative_tokens
from engine.heads.validate import validate_head
from tests.fixtures.torch_threads import cores_per_test_process
from tests.trainer.eagle.tiny_data import write_chat_data
from trainer.config import TrainConfig
from trainer.data.tokenize import TokenizedConversation
from trainer.eagle.checkpoint import latest_checkpoint, read_checkpoint_state
from trainer.eagle.reporting import TrainProgress, TrainResult
from trainer.train import train
from trainer.training.head import draft_vocab

REPO_ROOT = Path(__file__).resolve().parents[2]

# Tiny models gain nothing from a second thread (tests/fixtures/torch_threads.py).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_chat_data(tmp_path_factory.mktemp("data") / "chat.jsonl", conversations=40)


def config(model_dir: Path, data: Path, out_dir: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = {
        "model_dir": model_dir,
        "data_paths": [data],
        "out_dir": out_dir,
        "batch_tokens": 512,
        "ttt_steps": 3,
        "lr": 3e-3,
        "warmup_steps": 2,
        "checkpoint_every": 10,
        "eval_fraction": 0.1,
        "holdout_fraction": 0.0,
        # These tests are of training; the default recipe's distillation has its own.
        "regenerate": False,
        # Bit-exact comparisons need the same kernels everywhere; bf16 is covered separately.
        "compute_dtype": "float32",
        **overrides,
    }
    return TrainConfig(**settings)


def metrics(out_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]


def test_each_architecture_learns_a_repeated_batch(
    tiny_target_per_architecture_dir: Path, tmp_path: Path
) -> None:
    model_dir = tiny_target_per_architecture_dir
    architecture = AutoConfig.from_pretrained(model_dir).architectures[0]
    few = write_chat_data(tmp_path / "few.jsonl", conversations=6)
    result = train(
        config(
            model_dir, few, tmp_path / "run", batch_tokens=4096, eval_fraction=0.0, max_steps=25, epochs=100
        )
    )
    rows = metrics(tmp_path / "run")
    assert result.training.steps == 25
    assert len(rows) == 25
    assert result.head.target_architecture == architecture
    first, last = rows[0], rows[-1]
    # One batch holds all the data, so every step sees the same tokens.
    assert first["tokens"] == last["tokens"]
    # Qwen3-Next trains EAGLE-2 by default: one feature, the final norm's output (id N = 8).
    # It learns more slowly in 25 steps: its loss is mostly the regression onto features the
    # tiny model's final norm scales by 21, which the frozen lm_head then reads.
    eagle2 = architecture == "Qwen3NextForCausalLM"
    assert last["loss"] < (0.85 if eagle2 else 0.6) * first["loss"]
    assert last["step_accuracy"][0] > first["step_accuracy"][0] + (0.1 if eagle2 else 0.3)
    assert result.files.head_dir is not None
    report = validate_head(result.files.head_dir, AutoConfig.from_pretrained(model_dir))
    assert result.head.draft_variant == ("eagle2" if eagle2 else "eagle3")
    assert report.aux_layer_ids == ([8] if eagle2 else [2, 4, 5])


def test_eagle2_head_trains_exports_for_vllm_and_drafts_losslessly(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    few = write_chat_data(tmp_path / "few.jsonl", conversations=6)
    result = train(
        config(
            tiny_llama_dir,
            few,
            tmp_path / "run",
            variant="eagle2",
            batch_tokens=4096,
            eval_fraction=0.0,
            max_steps=25,
            epochs=100,
        )
    )
    rows = metrics(tmp_path / "run")
    first, last = rows[0], rows[-1]
    assert result.head.draft_variant == "eagle2"
    # Both losses fall: the feature regression and the token cross-entropy. Through the
    # target's frozen lm_head it learns more slowly than an EAGLE-3 head (0.3 vs 0.7 here).
    assert last["loss"] < 0.6 * first["loss"]
    assert last["step_feature_losses"][0] < first["step_feature_losses"][0]
    assert last["step_accuracy"][0] > first["step_accuracy"][0] + 0.2
    assert result.files.head_dir is not None
    head_dir = Path(result.files.head_dir)
    assert json.loads((head_dir / "config.json").read_text())["architectures"] == ["EagleLlamaForCausalLM"]
    assert "fc.bias" not in load_file(str(head_dir / "model.safetensors"))

    from engine.heads.export import load_head  # noqa: PLC0415
    from speculative import SpeculativeDecoder  # noqa: PLC0415

    target = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)
    decoder = SpeculativeDecoder(
        target, load_head(head_dir, target), num_speculative_tokens=3, eos_token_ids=[]
    )
    prompt = [1, 2, 40, 41, 42, 43, 44]
    speculative = decoder.generate(prompt, max_new_tokens=24)
    assert speculative.token_ids == decoder.generate_plain(prompt, max_new_tokens=24).token_ids


def test_result_metrics_and_progress_describe_the_run(
    tiny_llama_dir: Path, data: Path, tmp_path: Path
) -> None:
    events: list[TrainProgress] = []
    result = train(config(tiny_llama_dir, data, tmp_path / "run", max_steps=12), progress=events.append)
    assert result.training.stop_reason == "max_steps"
    assert not result.training.stopped
    assert result.training.steps == 12
    assert result.data.train_samples + result.data.eval_samples == 40
    assert result.data.eval_samples == 4
    assert result.data.records_read == 40
    assert result.data.records_skipped == 0
    assert result.data.regeneration_mode == "none"
    # No smaller size covers 99.9% of the learned tokens of a 259-token vocabulary.
    assert result.head.draft_vocab_size == 259
    assert result.head.draft_vocab_coverage == 1.0
    assert result.evaluation.final_eval is not None
    assert len(result.evaluation.final_eval.step_accuracy) == 3
    assert result.files.best_checkpoint is not None
    assert result.timing.tokens_trained > 0
    assert result.timing.train_tokens_per_s > 0
    # Its JSON stays flat: the worker stages it, and lineage.json copies fields from it by name.
    document = json.loads(result.model_dump_json())
    assert {"steps", "stop_reason", "final_eval", "train_samples", "draft_vocab_size", "seconds"} <= set(
        document
    )
    assert TrainResult.model_validate(document) == result
    assert result.hyperparameters["ttt_steps"] == 3
    stages = [e.stage for e in events]
    assert stages[0] == "loading_model"
    assert stages[-1] == "done"
    for expected in ("loading_data", "tokenizing", "training", "evaluating", "checkpointing", "exporting"):
        assert expected in stages
    training = [e for e in events if e.stage == "training"]
    assert [e.step for e in training] == list(range(1, 13))
    assert all(e.total_steps == 12 and e.loss is not None and e.lr and e.tokens_per_s for e in training)
    assert all(len(e.step_accuracy) == 3 and e.eta_seconds is not None for e in training)
    assert training[-1].eta_seconds == 0.0
    rows = metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == list(range(1, 13))
    assert set(rows[0]) >= {
        "loss",
        "step_accuracy",
        "acceptance_length_estimate",
        "lr",
        "elapsed",
        "grad_norm",
    }
    # Warm-up is capped at a tenth of the run (1 of 12 steps), then the cosine decays.
    assert rows[0]["lr"] == pytest.approx(3e-3)
    assert all(a["lr"] >= b["lr"] for a, b in itertools.pairwise(rows))
    assert rows[-1]["lr"] < 0.2 * rows[0]["lr"]
    assert (tmp_path / "run" / "eagle_model" / "model.safetensors").is_file()
    assert (tmp_path / "run" / "prepared" / "train.jsonl").is_file()


def test_resume_is_exact(tiny_llama_dir: Path, data: Path, tmp_path: Path) -> None:
    straight = train(config(tiny_llama_dir, data, tmp_path / "straight", max_steps=20))

    stop_after = 10
    steps_seen: list[int] = []

    def record(event: TrainProgress) -> None:
        if event.stage == "training":
            steps_seen.append(event.step)

    stopped = train(
        config(tiny_llama_dir, data, tmp_path / "resumed", max_steps=20),
        progress=record,
        should_stop=lambda: len(steps_seen) >= stop_after,
    )
    assert stopped.training.stopped
    assert stopped.training.stop_reason == "stop_requested"
    assert stopped.training.steps == stop_after
    assert stopped.files.head_dir is None  # a stopped run is continued, not published
    checkpoint = latest_checkpoint(tmp_path / "resumed" / "checkpoints")
    assert checkpoint is not None
    assert read_checkpoint_state(checkpoint)["step"] == stop_after

    resumed = train(config(tiny_llama_dir, data, tmp_path / "resumed", max_steps=20))
    assert resumed.training.resumed_from_step == stop_after
    assert resumed.training.steps == 20
    assert straight.files.head_dir is not None
    assert resumed.files.head_dir is not None
    a = load_file(str(Path(straight.files.head_dir) / "model.safetensors"))
    b = load_file(str(Path(resumed.files.head_dir) / "model.safetensors"))
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert [r["loss"] for r in metrics(tmp_path / "straight")] == [
        r["loss"] for r in metrics(tmp_path / "resumed")
    ]


def test_no_resume_starts_over(tiny_llama_dir: Path, data: Path, tmp_path: Path) -> None:
    train(config(tiny_llama_dir, data, tmp_path / "run", max_steps=10), should_stop=lambda: True)
    again = train(config(tiny_llama_dir, data, tmp_path / "run", max_steps=4, resume=False))
    assert again.training.resumed_from_step is None
    assert again.training.steps == 4
    assert len(metrics(tmp_path / "run")) == 4


def test_the_exported_head_serves_with_the_k_it_trained(
    tiny_llama_dir: Path, data: Path, tmp_path: Path
) -> None:
    result = train(config(tiny_llama_dir, data, tmp_path / "run", max_steps=1, ttt_steps=2))
    assert result.files.head_dir is not None
    exported = json.loads((Path(result.files.head_dir) / "config.json").read_text())
    assert served_speculative_tokens(exported) == 2
    assert recorded_speculative_tokens(exported).trained == 2
    assert exported["speculators_config"]["verifier"]["name_or_path"] == str(tiny_llama_dir)


def test_fine_tuning_keeps_the_heads_draft_vocabulary(
    tiny_llama_dir: Path, data: Path, tmp_path: Path
) -> None:
    base = train(config(tiny_llama_dir, data, tmp_path / "base", max_steps=6, draft_vocab_size=30))
    assert base.files.head_dir is not None
    other_data = write_chat_data(tmp_path / "other.jsonl", conversations=30, seed=5)
    tuned = train(
        config(
            tiny_llama_dir,
            other_data,
            tmp_path / "tuned",
            max_steps=6,
            init_head_dir=Path(base.files.head_dir),
        )
    )
    assert tuned.files.head_dir is not None
    before = load_file(str(Path(base.files.head_dir) / "model.safetensors"))
    after = load_file(str(Path(tuned.files.head_dir) / "model.safetensors"))
    assert torch.equal(before["d2t"], after["d2t"])
    assert torch.equal(before["t2d"], after["t2d"])
    assert not torch.equal(before["fc.weight"], after["fc.weight"])
    assert tuned.head.draft_vocab_size == 30


@pytest.mark.parametrize("clock", ["wall", "cpu"])
def test_time_budget_sizes_the_schedule_and_stops_in_time(
    tiny_llama_dir: Path, data: Path, tmp_path: Path, clock: str
) -> None:
    budget_minutes = 0.25
    result = train(
        config(
            tiny_llama_dir,
            data,
            tmp_path / "run",
            epochs=10_000,
            time_budget_minutes=budget_minutes,
            budget_clock=clock,
        )
    )
    assert result.timing.seconds < budget_minutes * 60 + 10
    assert result.timing.budget_clock == clock
    spent = result.timing.wall_seconds if clock == "wall" else result.timing.cpu_seconds
    assert spent == pytest.approx(result.timing.seconds, abs=2.0)
    assert result.training.stop_reason == "time_budget"
    rows = metrics(tmp_path / "run")
    assert len(rows) == result.training.steps > 10
    # The schedule was re-planned to end with the budget: the lr reached (close to) its floor.
    assert rows[-1]["lr"] < 0.3 * max(r["lr"] for r in rows)
    assert result.files.head_dir is not None


def test_max_steps_holds_under_a_time_budget(tiny_llama_dir: Path, data: Path, tmp_path: Path) -> None:
    # The budget planner once re-planned past max_steps during the first steps.
    result = train(
        config(
            tiny_llama_dir, data, tmp_path / "run", max_steps=3, time_budget_minutes=0.5, budget_clock="cpu"
        )
    )
    assert result.training.steps == 3
    assert len(metrics(tmp_path / "run")) == 3


def test_bfloat16_compute_trains(tiny_llama_dir: Path, data: Path, tmp_path: Path) -> None:
    result = train(config(tiny_llama_dir, data, tmp_path / "run", max_steps=20, compute_dtype="bfloat16"))
    rows = metrics(tmp_path / "run")
    assert rows[-1]["loss"] < rows[0]["loss"]
    assert result.evaluation.final_eval is not None


def test_data_without_assistant_turns_is_a_clear_error(tiny_llama_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "prompts.jsonl"
    data.write_text(json.dumps({"conversations": [{"from": "human", "value": "hello"}]}) + "\n")
    with pytest.raises(ValueError, match=r"no training samples: 1 records read.*1 without assistant tokens"):
        train(config(tiny_llama_dir, data, tmp_path / "run", max_steps=2))


def test_data_whose_prompts_all_exceed_the_prompt_room_names_that_room(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    # HumanEval's prompts, over 256 tokens each, once failed a small run with counts that
    # summed to nothing: every conversation had gone, and the message did not say where.
    data = tmp_path / "long.jsonl"
    long_prompt = {"from": "human", "value": "word " * 200}
    data.write_text(json.dumps({"conversations": [long_prompt, {"from": "gpt", "value": "ok"}]}) + "\n")
    with pytest.raises(ValueError, match=r"1 not distilled \(no prompt within 32 tokens") as failure:
        train(
            config(
                tiny_llama_dir,
                data,
                tmp_path / "run",
                max_steps=2,
                regenerate=True,
                regenerate_max_prompt_tokens=32,
            )
        )
    assert "regenerate_max_prompt_tokens" in str(failure.value)


def test_regeneration_replaces_answers_with_the_targets_own(
    tiny_llama_dir: Path, data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trainer.training")
    result = train(
        config(
            tiny_llama_dir,
            data,
            tmp_path / "run",
            max_steps=3,
            regenerate=True,
            regenerate_max_new_tokens=12,
            max_conversations=8,
        )
    )
    assert result.data.regeneration_mode == "greedy"
    assert result.data.regenerated_conversations == 8
    regenerated = (tmp_path / "run" / "regenerated.jsonl").read_text().splitlines()
    original = {json.loads(line)["conversations"][1]["value"] for line in data.read_text().splitlines()}
    answers = [json.loads(line)["conversations"][1]["value"] for line in regenerated]
    assert len(answers) == 8
    assert not set(answers) & original
    # No second target pass: every batch trains on the features recorded while generating.
    adopted = re.search(r"(\d+) of (\d+) training batches use features recorded", caplog.text)
    assert adopted is not None
    assert adopted.group(1) == adopted.group(2) != "0"


@pytest.mark.parametrize("continue_head", [False, True], ids=["new-head", "continued-head"])
def test_a_run_reusing_distilled_replies_still_trains_on_the_features_it_recorded(
    tiny_llama_dir: Path, data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, continue_head: bool
) -> None:
    """Reused replies have no recorded features; batched with new ones, they made every
    batch compute its features again (a chained job adopted none of its recorded features).
    A chained job also continues the last job's head, whose layers distillation must record
    (it recorded none for a continued head: 0 of 188 batches in a chained job)."""
    distil: dict[str, Any] = {"max_steps": 1, "regenerate": True, "regenerate_max_new_tokens": 6}
    train(config(tiny_llama_dir, data, tmp_path / "first", max_conversations=12, **distil))
    reused = tmp_path / "first" / "regenerated.jsonl"
    if continue_head:
        distil["init_head_dir"] = tmp_path / "first" / RUN_HEAD_DIRNAME
    caplog.set_level(logging.INFO, logger="trainer.training")
    result = train(config(tiny_llama_dir, data, tmp_path / "second", distilled_paths=[reused], **distil))
    assert (result.data.conversations_used, result.data.regenerated_conversations) == (40, 28)
    adopted = re.search(r"(\d+) of (\d+) training batches use features recorded", caplog.text)
    assert adopted is not None
    # Every batch of new replies uses what distilling recorded; the reused ones have their own.
    assert 0 < int(adopted.group(1)) < int(adopted.group(2))


@pytest.mark.slow
def test_cli_trains_a_smollm2_head_on_real_data(smollm2_dir: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    subprocess.run(
        [sys.executable, "-m", "trainer", "prepare-data", "humaneval", "champ", "--out", str(data_dir)],
        check=True,
        cwd=REPO_ROOT,
        capture_output=True,
    )
    out = tmp_path / "run"
    completed = subprocess.run(
        [
            sys.executable, "-m", "trainer", "train",
            "--model", str(smollm2_dir), "--data", str(data_dir), "--out", str(out),
            "--max-conversations", "16", "--max-length", "384", "--batch-tokens", "2048",
            # Replies of up to 64 tokens, not the default 128: distilling 24 conversations of 128
            # tokens was half of this test's 156 s (on a quiet 2-core AVX2 VM).
            "--regenerate-max-new-tokens", "64",
            "--max-steps", "12", "--ttt-steps", "3", "--checkpoint-every", "6",
            "--num-threads", str(cores_per_test_process()), "--draft-vocab-size", "8192",
        ],
        check=True,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert "steps:       12/12" in completed.stdout, completed.stdout
    assert "acceptance length estimate" in completed.stdout
    rows = metrics(out)
    assert len(rows) == 12
    assert sum(r["loss"] for r in rows[-4:]) < sum(r["loss"] for r in rows[:4])
    report = validate_head(out / "eagle_model", AutoConfig.from_pretrained(smollm2_dir))
    assert report.aux_layer_ids == [2, 15, 27]
    # The smallest standard size covering 99.9% of the learned tokens of this data.
    assert report.draft_vocab_size in (1024, 2048, 4096, 8192)


def test_default_draft_vocabulary_is_the_smallest_that_covers_the_data() -> None:
    tokens = list(range(100, 1600))  # 1500 distinct learned tokens
    samples = [TokenizedConversation(input_ids=tokens, loss_mask=[1] * len(tokens))]
    assert draft_vocab(samples, None, 50_000).draft_vocab_size == 2048
    # 1024 covers 68%: the whole (1700-token) vocabulary is next.
    assert draft_vocab(samples, None, 1700).draft_vocab_size == 1700
    assert draft_vocab(samples, 300, 50_000).draft_vocab_size == 300
