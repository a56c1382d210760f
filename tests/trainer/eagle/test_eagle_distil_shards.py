"""A distillation planned once and distilled in shards writes the records one run writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from engine.runner_cache import RunnerCache
from trainer.config import CUDA_GENERATION_ROWS, TrainConfig
from trainer.data.schema import Conversation, Message
from trainer.distil import DistillationPlan, ShardOutcome, distil_shard, plan_distillation
from trainer.eagle.data import REGENERATED_FILE, prepare_data
from trainer.eagle.distillation import CHUNK_BATCHES, chunk_size
from trainer.eagle.distilled import DistilledRecord, read_distilled
from trainer.eagle.self_instruct import SOURCE, SelfInstructResult
from trainer.models.tiny import build_tiny_target, build_tiny_tokenizer
from trainer.train import load_target, use_bf16


@pytest.fixture
def tiny_model_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "model"
    build_tiny_target("LlamaForCausalLM", vocab_size=259).save_pretrained(directory)
    build_tiny_tokenizer().save_pretrained(directory)
    return directory


def _config(model_dir: Path, data: Path, out: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = {
        "regenerate": True,
        "regenerate_max_new_tokens": 5,
        "regenerate_batch_size": 2,  # chunks of 16 conversations
        "holdout_fraction": 0.1,
        "eval_fraction": 0.0,
    }
    return TrainConfig(model_dir=model_dir, data_paths=[data], out_dir=out, **(settings | overrides))


def _one_run(config: TrainConfig) -> list[dict[str, Any]]:
    target, tokenizer = load_target(config.model_dir, torch.device("cpu"))
    prepare_data(
        config,
        target,
        tokenizer,
        report=lambda *_: None,
        should_stop=lambda: False,
        regenerate_deadline=None,
        regenerate_bf16=use_bf16(config.compute_dtype, target.device),
    )
    return [r.to_json() for r in read_distilled([config.out_dir / REGENERATED_FILE]).records]


def _in_shards(config: TrainConfig, chunks_per_shard: int) -> tuple[list[DistilledRecord], int]:
    plan = plan_distillation(config, should_stop=lambda: False)
    size = chunks_per_shard * plan.chunk_size
    records: list[DistilledRecord] = []
    shards = 0
    for start in range(0, len(plan.conversations), size):
        outcome = distil_shard(
            config,
            plan.conversations[start : start + size],
            first_chunk=start // plan.chunk_size,
            chunk_size=plan.chunk_size,
            origins=plan.origins,
            progress=lambda _done: None,
            should_stop=lambda: False,
        )
        assert not outcome.stopped
        records.extend(outcome.records)
        shards += 1
    return records, shards


def _the_whole_plan(
    config: TrainConfig,
    plan: DistillationPlan,
    *,
    progress: Callable[[int], None],
    should_stop: Callable[[], bool],
) -> ShardOutcome:
    """One shard holding every conversation of ``plan``, distilled with ``config``."""
    return distil_shard(
        config,
        plan.conversations,
        first_chunk=0,
        chunk_size=plan.chunk_size,
        origins=plan.origins,
        progress=progress,
        should_stop=should_stop,
    )


@pytest.mark.parametrize(
    ("overrides", "chunks_per_shard"),
    [
        ({"regenerate_turns": "last"}, 1),
        ({"regenerate_turns": "all"}, 1),
        (
            {
                "regenerate_turns": "last",
                "self_instruct_conversations": 6,
                "self_instruct_max_prompt_tokens": 8,
            },
            2,
        ),
    ],
)
def test_shards_write_the_records_of_one_run(
    tiny_model_dir: Path, chat_data: Path, tmp_path: Path, overrides: dict[str, Any], chunks_per_shard: int
) -> None:
    config = _config(tiny_model_dir, chat_data, tmp_path / "run", **overrides)
    expected = _one_run(config)
    records, shards = _in_shards(config, chunks_per_shard)

    assert shards >= 2
    assert len(expected) >= 36  # 40 conversations, 10 % held out (and self-instruct's)
    assert [r.to_json() for r in records] == expected


def test_prompts_written_round_by_round_are_the_plans_prompts(
    tiny_model_dir: Path, chat_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A single run writes its prompts a chunk at a time as distillation reaches them; the plan
    writes every round up front. Each round is seeded on its own, so both hold the same
    prompts in the same chunks. (The tiny target's own prompts all run past any short cap,
    so a writer that draws each prompt from torch's seeded generator stands in for it.)"""
    rounds: list[int] = []

    def seeded_writer(*args: object, **kwargs: object) -> SelfInstructResult:
        count = args[2]
        assert isinstance(count, int)
        rounds.append(count)
        numbers = torch.randint(0, 10**6, (count,)).tolist()
        prompts = [Conversation([Message("user", f"Spell {n} in words.")], source=SOURCE) for n in numbers]
        return SelfInstructResult(conversations=prompts, generated=count)

    monkeypatch.setattr("trainer.eagle.prompt_stream.synthesize_prompts", seeded_writer)
    # Chunks of 16: 20 prompts are written in two rounds (16, then 4) before the data's 36.
    config = _config(tiny_model_dir, chat_data, tmp_path / "run", self_instruct_conversations=20)
    expected = _one_run(config)
    records, shards = _in_shards(config, chunks_per_shard=1)

    assert rounds == [16, 4, 16, 4]  # the run's rounds, then the plan's
    assert shards == 4
    assert sum("Spell " in str(r["conversations"]) for r in expected) == 20
    assert [r.to_json() for r in records] == expected


def test_a_shard_chunks_as_its_plan_did_whatever_rows_its_device_runs(
    tiny_model_dir: Path, chat_data: Path, tmp_path: Path
) -> None:
    """A plan's chunks are sized by the planner's device; a shard on a device that runs more
    rows at once (a GPU's 256 against a CPU's 48) still chunks and seeds as the plan did."""
    config = _config(tiny_model_dir, chat_data, tmp_path / "run")
    expected = _one_run(config)
    plan = plan_distillation(config, should_stop=lambda: False)
    wider = config.model_copy(update={"regenerate_batch_size": 4})  # chunks of 32 by its own rows
    outcome = _the_whole_plan(wider, plan, progress=lambda _done: None, should_stop=lambda: False)

    assert (plan.chunk_size, chunk_size(wider, torch.device("cpu"))) == (16, 32)
    assert [r.to_json() for r in outcome.records] == expected


def test_chunks_are_eight_batches_of_the_rows_the_device_runs(tmp_path: Path) -> None:
    default = TrainConfig(model_dir=tmp_path, out_dir=tmp_path, data_paths=[tmp_path / "d.jsonl"])
    chosen = default.model_copy(update={"regenerate_batch_size": 16})

    assert chunk_size(default, torch.device("cpu")) == CHUNK_BATCHES * default.regenerate_batch_size
    assert chunk_size(default, torch.device("cuda")) == CHUNK_BATCHES * CUDA_GENERATION_ROWS
    assert chunk_size(chosen, torch.device("cuda")) == CHUNK_BATCHES * 16


def test_a_stopped_shard_keeps_its_finished_chunks(
    tiny_model_dir: Path, chat_data: Path, tmp_path: Path
) -> None:
    config = _config(tiny_model_dir, chat_data, tmp_path / "run", regenerate_turns="last")
    plan = plan_distillation(config, should_stop=lambda: False)
    replies: list[int] = []

    def stop_after_the_first_chunk() -> bool:
        return bool(replies) and replies[-1] >= plan.chunk_size

    outcome = _the_whole_plan(config, plan, progress=replies.append, should_stop=stop_after_the_first_chunk)
    assert outcome.stopped
    assert len(outcome.records) == plan.chunk_size


def test_a_stop_that_falls_as_the_last_chunk_ends_leaves_a_complete_shard(
    tiny_model_dir: Path, chat_data: Path, tmp_path: Path
) -> None:
    config = _config(tiny_model_dir, chat_data, tmp_path / "run", regenerate_turns="last")
    plan = plan_distillation(config, should_stop=lambda: False)
    one_chunk = plan.conversations[: plan.chunk_size]
    replies: list[int] = []

    def stop_once_the_chunk_is_answered() -> bool:
        return bool(replies) and replies[-1] >= len(one_chunk)

    outcome = distil_shard(
        config,
        one_chunk,
        first_chunk=0,
        chunk_size=plan.chunk_size,
        origins=plan.origins,
        progress=replies.append,
        should_stop=stop_once_the_chunk_is_answered,
    )
    # Nothing was left when the stop came: the plan must count this shard done, not stopped.
    assert not outcome.stopped
    assert len(outcome.records) == len(one_chunk)


def test_a_run_keeps_one_slot_runner_over_its_chunks(
    tiny_model_dir: Path, chat_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Distillation keeps its slot pool (and, on a GPU, its step graphs) over its chunks, and
    prompt writing over its rounds, instead of a runner a chunk (records unchanged: the shard
    tests above compare them with shards' own runners)."""
    caches: list[RunnerCache] = []
    takes: dict[int, int] = {}
    take = RunnerCache.take

    def counted(self: RunnerCache, **kwargs: Any) -> Any:
        if self not in caches:
            caches.append(self)
        takes[id(self)] = takes.get(id(self), 0) + 1
        return take(self, **kwargs)

    monkeypatch.setattr(RunnerCache, "take", counted)
    overrides = {
        "regenerate_turns": "last",
        "self_instruct_conversations": 20,
        "self_instruct_max_prompt_tokens": 8,
    }
    _one_run(_config(tiny_model_dir, chat_data, tmp_path / "run", **overrides))

    # Prompt writing's cache (the tiny target's prompts all run past the cap, so it writes
    # round after round until its attempts run out), then distillation's (3 chunks of up to 16).
    writing, distilling = caches
    assert takes[id(writing)] > 1
    assert takes[id(distilling)] == 3
    assert (writing.built, distilling.built) == (1, 1)
