"""The distillation plan of a run: its batches, the step cap, and the runner that turns a batch
into the target's features and the head's TTT loss."""

from __future__ import annotations

import logging
import math

from transformers import PreTrainedTokenizerBase

from engine.heads.model import Eagle3DraftModel
from trainer.config import TrainConfig
from trainer.data.tokenize import TokenizedConversation
from trainer.eagle.batch_runner import BatchRunner, TrainOrder
from trainer.eagle.batching import Batch, plan_batches
from trainer.eagle.budget_clock import Clock
from trainer.eagle.data_parallel import DataParallel
from trainer.eagle.features import FeatureCache, TargetTeacher
from trainer.eagle.generation_features import recorded_features
from trainer.eagle.prepared import PreparedData
from trainer.eagle.schedule import StepTimer
from trainer.training.data import (
    use_bf16,
)

logger = logging.getLogger(__name__)


def planned_step_cap(config: TrainConfig, batches_per_epoch: int) -> int:
    """The steps of ``epochs`` epochs, at most ``max_steps``; a time budget may plan fewer."""
    cap = max(1, math.ceil(config.epochs * batches_per_epoch))
    return cap if config.max_steps is None else min(cap, config.max_steps)


def plan_run_batches(config: TrainConfig, samples: list[TokenizedConversation]) -> list[Batch]:
    lengths = [len(s.input_ids) for s in samples]
    # Recorded features are used only by batches whose every sample has them: a job that also
    # trains on reused (cached) replies must not batch the two kinds together, or it computes
    # again every feature it paid for while distilling (a chained job adopted 0 of 1339 batches).
    recorded = [0 if recorded_features(s) is not None else 1 for s in samples]
    return plan_batches(
        lengths, batch_tokens=config.batch_tokens, max_batch_size=config.max_batch_size, groups=recorded
    )


def new_batch_runner(
    config: TrainConfig,
    head: Eagle3DraftModel,
    teacher: TargetTeacher,
    tokenizer: PreTrainedTokenizerBase,
    clock: Clock,
) -> BatchRunner:
    return BatchRunner(
        head,
        teacher,
        cache=FeatureCache(int(config.feature_cache_gb * 2**30) if config.feature_cache else 0),
        timer=StepTimer(),
        pad_id=int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0),
        ttt_steps=config.ttt_steps,
        ttt_decay=config.ttt_decay,
        autocast_bf16=use_bf16(config.compute_dtype, head.fc.weight.device),
        feature_loss_weight=_feature_loss_weight(config, head),
        peagle_keep_ratio=config.peagle_keep_ratio,
        clock=clock,
    )


# EAGLE-1/2 weigh feature regression 1.0 and token cross-entropy 0.1 (a weight of 10 here).
# With the frozen lm_head that starved the token loss: on tiny targets, after 25 steps, first-
# draft accuracy was 0.11 at 10, 0.30 at 1 and 0.39 at 0.1; 1 keeps regression a real share.
_EAGLE2_FEATURE_LOSS_WEIGHT = 1.0


def _feature_loss_weight(config: TrainConfig, head: Eagle3DraftModel) -> float:
    if config.feature_loss_weight is not None:
        return config.feature_loss_weight
    return _EAGLE2_FEATURE_LOSS_WEIGHT if head.config.variant == "eagle2" else 0.0


def adopt_recorded_features(
    runner: BatchRunner,
    order: TrainOrder,
    eval_batches: list[Batch],
    data: PreparedData,
    parallel: DataParallel,
) -> None:
    """Features recorded while distilling go straight into the cache (of this rank's shards),
    so the schedule plans those batches as cached."""

    def shards(
        batches: list[Batch], samples: list[TokenizedConversation], kind: str
    ) -> list[tuple[str, Batch]]:
        keyed = ((f"{kind}-{i}", parallel.shard(batch, samples)) for i, batch in enumerate(batches))
        return [(key, shard) for key, shard in keyed if shard is not None]

    adopted = runner.adopt_recorded_features(shards(order.batches, data.train, "train"), data.train)
    runner.adopt_recorded_features(shards(eval_batches, data.eval, "eval"), data.eval)
    logger.info("%d of %d training batches use features recorded while distilling", adopted, len(order))
