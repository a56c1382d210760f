"""Distillation split in two for a fan-out: plan the conversations once, distil shards anywhere.

``plan_distillation`` lists, in order, exactly the conversations ``trainer.train`` would
distil for a config (the data's, shuffled and filtered, with the target's self-instruct
prompts mixed in); ``distil_shard`` distils a run of whole chunks of that list. Together they
give the records one ``train`` run writes to ``regenerated.jsonl`` (greedy decoding), so
a job can spread the work over many processes and train on the union.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from trainer.config import TrainConfig
from trainer.data.schema import Conversation
from trainer.device import resolve_device
from trainer.eagle.data import generation_copy, with_self_instruct
from trainer.eagle.distillation import (
    chunk_size,
    distil_chunks,
    distilled_records,
    select_conversations,
)
from trainer.eagle.distilled import DistilledRecord, origins_of
from trainer.eagle.prepared import DataStats
from trainer.train import load_target, use_bf16


@dataclass
class DistillationPlan:
    conversations: list[Conversation]  # in distillation order
    origins: dict[str, str]  # the data conversations' origins by source
    chunk_size: int
    self_instruct: dict[str, object] | None  # the self-instruct summary, as DataStats keeps it


@dataclass
class ShardOutcome:
    records: list[DistilledRecord]
    generated_tokens: int
    seconds: float
    stopped: bool


def plan_distillation(
    config: TrainConfig,
    *,
    should_stop: Callable[[], bool],
    progress: Callable[[str, int, int], None] | None = None,
) -> DistillationPlan:
    """The conversations to distil, in order. Loads the target only to write self-instruct prompts."""
    selection = select_conversations(config)
    conversations = selection.to_distil
    origins = origins_of(conversations)
    stats = DataStats()
    if config.self_instruct_conversations:
        _threads(config)
        generator, tokenizer = _generation_model(config)

        def report(stage: Any, done: int, total: int) -> None:
            if progress is not None:
                progress(str(stage), done, total)

        conversations = with_self_instruct(
            config, generator, tokenizer, conversations, stats, report, should_stop, selection.answered
        )
    # The planner's device sizes the chunks (and so the rounds it wrote prompts in); every
    # shard chunks as it did, on whatever device it runs.
    size = chunk_size(config, resolve_device(config.device))
    return DistillationPlan(conversations, origins, size, stats.self_instruct)


def distil_shard(
    config: TrainConfig,
    conversations: Sequence[Conversation],
    *,
    first_chunk: int,
    chunk_size: int,
    origins: dict[str, str],
    progress: Callable[[int], None],
    should_stop: Callable[[], bool],
) -> ShardOutcome:
    """Distil ``conversations``, which begin at chunk ``first_chunk`` of the plan.

    ``progress(replies)`` follows the work. Features are not recorded (they
    would not fit a record): training computes them from the target, as for a cache's records.
    """
    started = time.monotonic()
    _threads(config)
    generator, tokenizer = _generation_model(config)
    chunks = distil_chunks(
        config,
        generator,
        tokenizer,
        conversations,
        first_chunk=first_chunk,
        progress=progress,
        should_stop=should_stop,
        feature_layers=None,
        size=chunk_size,
    )
    return ShardOutcome(
        records=distilled_records(config, chunks, origins),
        generated_tokens=chunks.generated_tokens,
        seconds=time.monotonic() - started,
        stopped=chunks.stopped,
    )


def _generation_model(config: TrainConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model the target's replies (or prompts) are written with, and the tokenizer.

    Nothing here trains, so the float32 target goes once its bf16 copy exists: held alongside
    it for the whole shard, it kept 4 bytes a parameter on the GPU that the 256-row KV pool
    and feature buffers could have used (for a 12B target, 48 GB of an 80 GB H100)."""
    target, tokenizer = load_target(config.model_dir, resolve_device(config.device))
    return generation_copy(target, bf16=use_bf16(config.compute_dtype, target.device)), tokenizer


def _threads(config: TrainConfig) -> None:
    if config.num_threads is not None:
        torch.set_num_threads(config.num_threads)
