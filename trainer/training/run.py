"""The run every training stage shares: its config, budget clock, callbacks and files, and the
result it returns."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from engine.heads.config import Eagle3HeadConfig
from engine.heads.export import RUN_HEAD_DIRNAME
from engine.heads.head_format import draft_variant
from trainer.config import TrainConfig
from trainer.eagle.budget_clock import Clock, budget_clock
from trainer.eagle.prepared import PREPARED_DIR, DataStats, PreparedData
from trainer.eagle.reporting import (
    DataSummary,
    DraftHeadSummary,
    Evaluation,
    RunFiles,
    Stage,
    Timing,
    TrainingSummary,
    TrainProgress,
    TrainResult,
)

ProgressFn = Callable[[TrainProgress], None]
HEAD_DIRNAME = RUN_HEAD_DIRNAME
CHECKPOINT_DIRNAME = "checkpoints"
METRICS_FILE = "metrics.jsonl"
# Time kept back from a budget for the final checkpoint and export (plus one evaluation,
# timed as the run goes).
_RESERVE_SECONDS = 15.0


def _never() -> bool:
    return False


@dataclass
class Run:
    """What every step of a run shares: its config, the budget clock and the caller's callbacks."""

    config: TrainConfig
    progress: ProgressFn | None
    should_stop: Callable[[], bool]
    clock: Clock  # every budget and stage time is on this clock
    wall_started: float
    cpu_started: float
    started: float  # on the budget clock
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def budget(self) -> float | None:
        minutes = self.config.time_budget_minutes
        return None if minutes is None else minutes * 60.0

    @property
    def checkpoint_dir(self) -> Path:
        return self.config.out_dir / CHECKPOINT_DIRNAME

    def report(self, stage: Stage, step: int = 0, total: int = 0, **fields: Any) -> None:
        if self.progress is not None:
            elapsed = self.clock() - self.started
            self.progress(
                TrainProgress(stage=stage, step=step, total_steps=total, elapsed_seconds=elapsed, **fields)
            )

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        mark = self.clock()
        yield
        self.stage_seconds[stage] = self.clock() - mark

    def train_deadline(self, eval_seconds: float) -> float | None:
        """When the training loop stops, leaving time for the final evaluation, checkpoint and export."""
        if self.budget is None:
            return None
        return self.started + self.budget - min(_RESERVE_SECONDS, 0.1 * self.budget) - eval_seconds

    def files(self, *, head_dir: Path | None, best: Path | None) -> RunFiles:
        return RunFiles(
            out_dir=str(self.config.out_dir),
            head_dir=str(head_dir) if head_dir else None,
            metrics_path=str(self.config.out_dir / METRICS_FILE),
            checkpoint_dir=str(self.checkpoint_dir),
            best_checkpoint=str(best) if best else None,
        )

    def timing(self, *, tokens_trained: int, train_seconds: float) -> Timing:
        return Timing(
            tokens_trained=tokens_trained,
            train_tokens_per_s=tokens_trained / train_seconds if train_seconds > 0 else 0.0,
            stage_seconds=self.stage_seconds,
            seconds=self.clock() - self.started,
            wall_seconds=time.monotonic() - self.wall_started,
            cpu_seconds=time.process_time() - self.cpu_started,
            budget_clock=self.config.budget_clock,
        )


def start_run(
    config: TrainConfig,
    progress: ProgressFn | None,
    should_stop: Callable[[], bool] | None,
    *,
    clean: bool = True,
) -> Run:
    """Start the clocks, seed, and clear the output directory unless resuming (or ``clean`` is
    false: a helper rank finds it as rank 0 left it)."""
    clock = budget_clock(config.budget_clock)
    run = Run(
        config,
        progress,
        should_stop or _never,
        clock,
        wall_started=time.monotonic(),
        cpu_started=time.process_time(),
        started=clock(),
    )
    if config.num_threads is not None:
        torch.set_num_threads(config.num_threads)
    torch.manual_seed(config.seed)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    if clean and not config.resume:
        # Starting over: an earlier run's checkpoints and samples must not be picked up.
        for stale in (run.checkpoint_dir, config.out_dir / PREPARED_DIR):
            shutil.rmtree(stale, ignore_errors=True)
    return run


def stopped_before_training(run: Run, data: PreparedData, architecture: str) -> TrainResult:
    return run_result(
        run,
        data,
        files=run.files(head_dir=None, best=None),
        training=TrainingSummary(stopped=True, stop_reason="stop_requested"),
        evaluation=Evaluation(),
        head=DraftHeadSummary(target_architecture=architecture),
    )


def run_result(
    run: Run,
    data: PreparedData,
    *,
    files: RunFiles,
    training: TrainingSummary,
    evaluation: Evaluation,
    head: DraftHeadSummary,
    tokens_trained: int = 0,
    train_seconds: float = 0.0,
) -> TrainResult:
    return TrainResult(
        files=files,
        training=training,
        evaluation=evaluation,
        data=_data_summary(data.stats),
        head=head,
        timing=run.timing(tokens_trained=tokens_trained, train_seconds=train_seconds),
        hyperparameters=run.config.model_dump(mode="json"),
        data_stats=asdict(data.stats),
    )


def _data_summary(stats: DataStats) -> DataSummary:
    return DataSummary(
        records_read=stats.records_read,
        records_skipped=stats.records_skipped,
        conversations_used=stats.conversations_used,
        conversations_heldout=stats.conversations_heldout,
        train_samples=stats.train_samples,
        eval_samples=stats.eval_samples,
        train_tokens=stats.train_tokens,
        regeneration_mode=stats.regeneration_mode,
        regeneration_seconds=stats.regeneration_seconds,
        regenerated_conversations=stats.regenerated_conversations,
        self_instruct=stats.self_instruct,
    )


def head_summary(architecture: str, config: Eagle3HeadConfig, coverage: float | None) -> DraftHeadSummary:
    return DraftHeadSummary(
        draft_vocab_size=config.draft_vocab_size,
        draft_vocab_coverage=coverage,
        aux_layer_ids=list(config.aux_layer_ids),
        target_architecture=architecture,
        draft_variant=draft_variant(config),
    )
