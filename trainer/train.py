"""Train an EAGLE-3 draft head for a frozen target model. ``train`` reads top to bottom:

start (clocks, seed, output directory) -> target -> data (load, hold out, regenerate,
tokenise) -> draft vocabulary and head -> trainer (optimizer, batches) -> resume -> loop
(features, TTT loss, step, log, evaluate + checkpoint, stop flag, time budget) -> last
checkpoint -> export -> result. ``_Run`` is what every step shares (config, budget clock,
callbacks); ``_Trainer`` is the head's optimisation and how far it got.

``train(config, progress, should_stop)`` is what the worker and ``python -m trainer
train`` call. It returns cleanly (``stopped=True``, after a checkpoint) when
``should_stop()`` turns true, and resumes from the latest checkpoint in ``out_dir``.

With ``nproc`` > 1 the caller is rank 0 of a data-parallel run (``trainer.eagle.data_parallel``):
it prepares the data, starts the other ranks (``train_as_helper`` in their processes), and
alone writes metrics, checkpoints and the head; its decisions (schedule, stop) bind them all.
"""

from __future__ import annotations

import logging
import math
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm
from transformers import AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from trainer.config import TrainConfig
from trainer.data.tokenize import TokenizedConversation
from trainer.data.vocab import DraftVocab, build_draft_vocab
from trainer.device import bf16_matmuls_native, load_causal_lm, resolve_device
from trainer.eagle.batch_runner import BatchRunner, TrainOrder
from trainer.eagle.batching import Batch, plan_batches
from trainer.eagle.budget_clock import Clock, budget_clock
from trainer.eagle.capture import check_supported, decoder_layers, input_embedding_weight
from trainer.eagle.checkpoint import (
    best_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    load_head_weights,
    save_checkpoint,
)
from trainer.eagle.config import Eagle3HeadConfig, default_feature_layer_ids, default_variant
from trainer.eagle.data import (
    PREPARED_DIR,
    DataStats,
    PreparedData,
    data_fingerprint,
    load_prepared,
    prepare_data,
    save_prepared,
)
from trainer.eagle.data_parallel import DataParallel
from trainer.eagle.export import RUN_HEAD_DIRNAME, export_head, load_head, new_head
from trainer.eagle.features import FeatureCache, TargetTeacher
from trainer.eagle.generation_features import recorded_features
from trainer.eagle.head_format import draft_variant
from trainer.eagle.head_init import init_head_from_target
from trainer.eagle.model import Eagle3DraftModel
from trainer.eagle.optimizer import HeadOptimizer, build_optimizer
from trainer.eagle.peagle import PEagleHeadConfig, default_mask_token_id
from trainer.eagle.process_group import data_parallel_group
from trainer.eagle.reporting import (
    DataSummary,
    DraftHeadSummary,
    EvalMetrics,
    Evaluation,
    MetricsLog,
    RunFiles,
    Stage,
    StopReason,
    Timing,
    TrainingSummary,
    TrainProgress,
    TrainResult,
    acceptance_length_estimate,
)
from trainer.eagle.schedule import StepTimer, estimate_seconds, learning_rate, steps_that_fit
from trainer.eagle.ttt import TTTOutput
from trainer.eagle.validate import read_head_config

logger = logging.getLogger(__name__)

ProgressFn = Callable[[TrainProgress], None]
HEAD_DIRNAME = RUN_HEAD_DIRNAME
CHECKPOINT_DIRNAME = "checkpoints"
METRICS_FILE = "metrics.jsonl"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Time kept back from a budget for the final checkpoint and export (plus one evaluation,
# timed as the run goes).
_RESERVE_SECONDS = 15.0


def train(
    config: TrainConfig,
    progress: ProgressFn | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> TrainResult:
    run = _start(config, progress, should_stop)
    target, tokenizer, architecture = _load_target_timed(run)
    device = target.device
    data = _prepare_data(run, target, tokenizer)
    if data.stopped:
        run.report("done")
        return _stopped_before_training(run, data, architecture)
    if not data.train:
        raise ValueError(_no_samples_message(data))
    head, vocab_coverage = _build_head(config, target, data.train)
    teacher = _teacher(config, target, head)
    _share_cores(config)
    with data_parallel_group(config, device) as parallel:
        trainer = _Trainer.create(run, head, teacher, tokenizer, data, parallel=parallel)
        trainer.resume(latest_checkpoint(run.checkpoint_dir))
        trainer.loop()
        trainer.checkpoint_last_step()
    best = best_checkpoint(run.checkpoint_dir)
    # A stopped run is resumed later, not published.
    head_dir = None if trainer.stopped else trainer.export(best)
    run.report("done", trainer.step, trainer.total_steps)
    return _result(
        run,
        data,
        files=run.files(head_dir=head_dir, best=best),
        training=trainer.summary(),
        evaluation=Evaluation(final_eval=trainer.last_eval, best_eval=trainer.best_eval),
        head=_head_summary(architecture, head.config, vocab_coverage),
        tokens_trained=trainer.tokens_trained,
        train_seconds=trainer.train_seconds,
    )


def train_as_helper(config: TrainConfig, parallel: DataParallel) -> None:
    """Rank ``parallel.rank`` > 0 of a data-parallel run: the samples rank 0 prepared, the
    same head and schedule, its share of every batch; it writes nothing."""
    run = _start(config, None, None, clean=False)
    _share_cores(config)
    target, tokenizer = load_target(config.model_dir, parallel.device)
    data = load_prepared(config.out_dir, data_fingerprint(config))
    if data is None:
        raise RuntimeError(f"{config.out_dir / PREPARED_DIR}: rank 0 prepared no samples for this run")
    head, _ = _build_head(config, target, data.train)
    trainer = _Trainer.create(run, head, _teacher(config, target, head), tokenizer, data, parallel=parallel)
    trainer.resume(latest_checkpoint(run.checkpoint_dir))
    trainer.loop()
    trainer.checkpoint_last_step()


def _share_cores(config: TrainConfig) -> None:
    """N CPU ranks without num_threads split torch's threads between them instead of each taking
    them all (oversubscribed cores make every rank wait for the slowest). Rank 0 prepared the data
    with all of them first."""
    if config.nproc > 1 and config.num_threads is None:
        torch.set_num_threads(max(1, torch.get_num_threads() // config.nproc))


# ---------------------------------------------------------------------- the run


def _never() -> bool:
    return False


@dataclass
class _Run:
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


def _start(
    config: TrainConfig,
    progress: ProgressFn | None,
    should_stop: Callable[[], bool] | None,
    *,
    clean: bool = True,
) -> _Run:
    """Start the clocks, seed, and clear the output directory unless resuming (or ``clean`` is
    false: a helper rank finds it as rank 0 left it)."""
    clock = budget_clock(config.budget_clock)
    run = _Run(
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


def _load_target_timed(run: _Run) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, str]:
    run.report("loading_model")
    with run.timed("load_model"):
        target, tokenizer = load_target(run.config.model_dir, resolve_device(run.config.device))
        architecture = check_supported(target.config)
    return target, tokenizer, architecture


def _prepare_data(run: _Run, target: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> PreparedData:
    """The samples an earlier attempt of this run prepared from the same inputs, or new ones."""
    config = run.config
    with run.timed("data"):
        fingerprint = data_fingerprint(config)
        data = load_prepared(config.out_dir, fingerprint)
        if data is None:
            data = _new_data(run, target, tokenizer)
            if not data.stopped:
                save_prepared(config.out_dir, data, fingerprint)
    return data


def _new_data(run: _Run, target: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> PreparedData:
    config, budget = run.config, run.budget
    deadline = None if budget is None else run.started + budget * config.regenerate_budget_fraction
    return prepare_data(
        config,
        target,
        tokenizer,
        report=run.report,
        should_stop=run.should_stop,
        regenerate_deadline=deadline,
        regenerate_bf16=use_bf16(config.compute_dtype, target.device),
        clock=run.clock,
        feature_layers=_recorded_feature_layers(config, target),
    )


def _recorded_feature_layers(config: TrainConfig, target: PreTrainedModel) -> list[int] | None:
    """The layers whose features distillation records for the head: a fine-tuned head's own
    (from its config.json; recording nothing for it made every chained job compute each
    feature of its new replies a second time)."""
    if config.init_head_dir is not None:
        return list(read_head_config(config.init_head_dir, target.config).aux_layer_ids)
    variant = config.variant or default_variant(check_supported(target.config))
    return list(config.aux_layer_ids or default_feature_layer_ids(variant, len(decoder_layers(target))))


def _teacher(config: TrainConfig, target: PreTrainedModel, head: Eagle3DraftModel) -> TargetTeacher:
    """The target's features and logits for the head; a new head starts from the target's weights."""
    teacher = TargetTeacher(
        target,
        head.config.aux_layer_ids,
        draft_target_ids=torch.nonzero(head.t2d).flatten(),
        feature_dtype=_DTYPES[config.feature_dtype],
        autocast_bf16=use_bf16(config.compute_dtype, target.device),
    )
    if config.init_head_dir is None:
        init_head_from_target(head, target, teacher.draft_lm_head_rows, config.init_from_target)
    return teacher


def _stopped_before_training(run: _Run, data: PreparedData, architecture: str) -> TrainResult:
    return _result(
        run,
        data,
        files=run.files(head_dir=None, best=None),
        training=TrainingSummary(stopped=True, stop_reason="stop_requested"),
        evaluation=Evaluation(),
        head=DraftHeadSummary(target_architecture=architecture),
    )


def _result(
    run: _Run,
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


def _head_summary(architecture: str, config: Eagle3HeadConfig, coverage: float | None) -> DraftHeadSummary:
    return DraftHeadSummary(
        draft_vocab_size=config.draft_vocab_size,
        draft_vocab_coverage=coverage,
        aux_layer_ids=list(config.aux_layer_ids),
        target_architecture=architecture,
        draft_variant=draft_variant(config),
    )


# ---------------------------------------------------------------------- the training loop


@dataclass(frozen=True)
class _StepRecord:
    """One optimizer step's numbers, for its metrics.jsonl line and its progress report."""

    out: TTTOutput
    lr: float
    grad_norm: float
    tokens: int  # real (unpadded) tokens of the batch
    began: float
    head_began: float  # after the target's features
    ended: float


@dataclass
class _Trainer:
    """The head's optimisation: the head and optimizer, the batches, and how far it got."""

    run: _Run
    head: Eagle3DraftModel
    optimizer: HeadOptimizer
    runner: BatchRunner
    order: TrainOrder  # global batches: a data-parallel rank trains on its shard of each
    data: PreparedData
    eval_batches: list[Batch]
    parallel: DataParallel
    step_cap: int  # epochs or max_steps; a time budget may plan fewer
    total_steps: int  # re-planned under a time budget
    step: int = 0
    resumed_from_step: int | None = None
    checkpointed_step: int | None = None
    tokens_trained: int = 0
    train_seconds_before: float = 0.0  # in earlier attempts, from the checkpoint
    loop_started: float = 0.0
    last_loss: float | None = None
    last_accuracy: list[float] = field(default_factory=list)
    last_eval: EvalMetrics | None = None
    best_eval: EvalMetrics | None = None
    eta: tuple[float, float] | None = None  # (estimate, when it was made)
    stopped: bool = False

    @classmethod
    def create(
        cls,
        run: _Run,
        head: Eagle3DraftModel,
        teacher: TargetTeacher,
        tokenizer: PreTrainedTokenizerBase,
        data: PreparedData,
        *,
        parallel: DataParallel,
    ) -> _Trainer:
        config = run.config
        optimizer = build_optimizer(
            head, name=config.optimizer, lr=config.lr, weight_decay=config.weight_decay
        )
        order = TrainOrder(_plan_batches(config, data.train), seed=config.seed)
        eval_batches = _plan_batches(config, data.eval)
        runner = _batch_runner(config, head, teacher, tokenizer, run.clock)
        _adopt_recorded_features(runner, order, eval_batches, data, parallel)
        step_cap = _step_cap(config, len(order))
        return cls(
            run, head, optimizer, runner, order, data, eval_batches, parallel, step_cap, total_steps=step_cap
        )

    @property
    def evals_per_step(self) -> float:
        return 1.0 / self.run.config.checkpoint_every if self.eval_batches else 0.0

    @property
    def train_seconds(self) -> float:
        return self.train_seconds_before + self.run.stage_seconds["train"]

    def resume(self, checkpoint: Path | None) -> None:
        """Continue from ``checkpoint``, when there is one: the head, optimizer and RNG, and the
        counts; then every rank holds rank 0's weights (a new head's random ones, too)."""
        if checkpoint is None:
            self.parallel.copy_main_weights(self.head)
            return
        state = load_checkpoint(checkpoint, head=self.head, optimizer=self.optimizer)
        self.parallel.copy_main_weights(self.head)
        self.step = self.resumed_from_step = self.checkpointed_step = int(state["step"])
        self.total_steps = max(int(state["total_steps"]), self.step)
        self.best_eval = EvalMetrics(**state["best_eval"]) if state.get("best_eval") else None
        self.last_eval = EvalMetrics(**state["eval"]) if state.get("eval") else None
        self.tokens_trained = int(state.get("tokens_trained", 0))
        self.train_seconds_before = float(state.get("train_seconds", 0.0))
        logger.info("resumed from %s at step %d of %d", checkpoint, self.step, self.total_steps)

    def loop(self) -> None:
        """Steps until the schedule ends, a stop is requested or the time budget is spent."""
        main = self.parallel.is_main
        metrics = (
            MetricsLog(self.run.config.out_dir / METRICS_FILE, keep_through_step=self.resumed_from_step)
            if main
            else None
        )
        self.head.train()
        self.loop_started = self.run.clock()
        bar = tqdm(
            total=self.total_steps,
            initial=self.step,
            disable=not (main and sys.stderr.isatty()),
            desc="train",
            unit="step",
        )
        while self.step < self.total_steps:
            record = self._step()
            if metrics is not None:
                metrics.write(self._metrics_line(record))
            if main:
                self._replan(record.ended, bar)
                self._report(record, bar)
            (self.total_steps,) = self.parallel.from_main([self.total_steps])
            if self.step % self.run.config.checkpoint_every == 0 and self.step < self.total_steps:
                self._evaluate_and_checkpoint()
            # Rank 0 decides for every rank, so all stop after the same step.
            stop, out_of_time = self.parallel.from_main(
                [int(main and self.run.should_stop()), int(main and self._out_of_time())]
            )
            if stop:
                self.stopped = True
                break
            if out_of_time:
                break
        bar.close()
        self.run.stage_seconds["train"] = self.run.clock() - self.loop_started

    def _step(self) -> _StepRecord:
        """One optimizer step on the step's batch (this rank's shard of it; gradients summed over ranks)."""
        clock = self.run.clock
        began = clock()
        key, batch = self.order.batch_at(self.step)
        lr = self._set_learning_rate()
        self.optimizer.zero_grad(set_to_none=True)
        shard = self.parallel.shard(batch, self.data.train)
        if shard is None:
            head_began = clock()
            out, tokens = self._empty_shard(), 0
        else:
            tensors, features = self.runner.features(key, self.data.train, shard)
            head_began = clock()
            global_counts = self.parallel.sum_counts if self.parallel.enabled else None
            out = self.runner.loss(tensors, features, global_counts=global_counts)
            out.loss.backward()  # type: ignore[no-untyped-call]
            tokens = int(tensors.attention_mask.sum())
        self.parallel.sum_gradients(self.head)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.head.parameters(), self.run.config.grad_clip)
        self.optimizer.step()
        self.step += 1
        out, tokens = self._summed_over_ranks(out, tokens)
        ended = clock()
        self.runner.timer.record_head(ended - head_began, batch.padded_tokens)
        self.tokens_trained += tokens
        self.last_loss, self.last_accuracy = float(out.loss.detach()), out.step_accuracy
        return _StepRecord(out, lr, float(grad_norm), tokens, began, head_began, ended)

    def _empty_shard(self) -> TTTOutput:
        """A rank without rows in this batch adds nothing, but joins the count sum all ranks make."""
        steps = self.run.config.ttt_steps
        self.parallel.sum_counts([0] * steps)
        zeros = [0.0] * steps
        features = zeros if self.runner.feature_loss_weight > 0 else None
        return TTTOutput(torch.zeros(()), zeros, zeros, [0] * steps, features)

    def _summed_over_ranks(self, out: TTTOutput, tokens: int) -> tuple[TTTOutput, int]:
        """The global batch's numbers: each rank's are its share (normalised by the global counts)."""
        if not self.parallel.enabled:
            return out, tokens
        steps = len(out.step_losses)
        features = out.step_feature_losses
        summed = self.parallel.sum(
            [
                float(out.loss.detach()),
                *out.step_losses,
                *out.step_accuracy,
                *out.step_counts,
                *(features or [0.0] * steps),
                float(tokens),
            ]
        )
        parts = [summed[1 + i * steps : 1 + (i + 1) * steps] for i in range(4)]
        total = TTTOutput(
            loss=torch.tensor(summed[0]),
            step_losses=parts[0],
            step_accuracy=parts[1],
            step_counts=[round(count) for count in parts[2]],
            step_feature_losses=parts[3] if features is not None else None,
        )
        return total, round(summed[-1])

    def _set_learning_rate(self) -> float:
        config = self.run.config
        lr = learning_rate(
            self.step,
            total_steps=self.total_steps,
            peak=config.lr,
            warmup_steps=config.warmup_steps,
            min_ratio=config.min_lr_ratio,
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _metrics_line(self, record: _StepRecord) -> dict[str, Any]:
        out = record.out
        return {
            "step": self.step,
            "epoch": self.step / len(self.order),
            "loss": self.last_loss,
            "step_losses": out.step_losses,
            "step_accuracy": out.step_accuracy,
            "step_feature_losses": out.step_feature_losses,
            "acceptance_length_estimate": acceptance_length_estimate(out.step_accuracy),
            "masked_tokens": out.step_counts[0],
            "lr": record.lr,
            "grad_norm": record.grad_norm,
            "tokens": record.tokens,
            "step_seconds": record.ended - record.began,
            "feature_seconds": record.head_began - record.began,
            "elapsed": record.ended - self.run.started,
        }

    def _replan(self, now: float, bar: tqdm) -> None:
        """Under a time budget, size the schedule to the steps that still fit; re-planned as the
        timings settle (the first epoch also pays for the target's features)."""
        if self.step > 10 and self.step % 10 != 0:
            return
        timer = self.runner.timer
        deadline = self.run.train_deadline(timer.eval_seconds)
        if deadline is not None:
            fit = steps_that_fit(
                self._upcoming(), seconds=deadline - now, timer=timer, evals_per_step=self.evals_per_step
            )
            if fit is not None:
                self.total_steps = min(self.step_cap, max(self.step + 1, self.step + fit))
                bar.total = self.total_steps
        estimate = estimate_seconds(
            self._upcoming(),
            steps=self.total_steps - self.step,
            timer=timer,
            evals_per_step=self.evals_per_step,
        )
        self.eta = None if estimate is None else (estimate, now)

    def _upcoming(self) -> Iterator[tuple[int, bool]]:
        runner = self.runner
        return self.order.upcoming(self.step, self.step_cap, runner.cache, runner.feature_bytes_per_token)

    def _report(self, record: _StepRecord, bar: tqdm) -> None:
        accuracy = record.out.step_accuracy
        self.run.report(
            "training",
            self.step,
            self.total_steps,
            loss=self.last_loss,
            step_accuracy=accuracy,
            lr=record.lr,
            tokens_per_s=record.tokens / max(record.ended - record.began, 1e-9),
            eta_seconds=self._eta_seconds(record.ended),
        )
        bar.update(1)
        bar.set_postfix(loss=f"{self.last_loss:.3f}", acc0=f"{accuracy[0]:.2f}")

    def _eta_seconds(self, now: float) -> float | None:
        # The last step has nothing left to estimate; an estimate made steps ago and counted
        # down since would still show what a faster-than-predicted run left over.
        if self.step >= self.total_steps:
            return 0.0
        return None if self.eta is None else max(0.0, self.eta[0] - (now - self.eta[1]))

    def _out_of_time(self) -> bool:
        deadline = self.run.train_deadline(self.runner.timer.eval_seconds)
        return deadline is not None and self.run.clock() >= deadline

    def checkpoint_last_step(self) -> None:
        """Evaluate and checkpoint the last step, unless the loop just did."""
        if self.step > 0 and self.checkpointed_step != self.step:
            self._evaluate_and_checkpoint()

    def _evaluate_and_checkpoint(self) -> None:
        """Every rank evaluates its shard of the held-out batches; rank 0 writes the checkpoint."""
        self.run.report("evaluating", self.step, self.total_steps)
        evaluation = self.last_eval = self.runner.evaluate(self.eval_batches, self.data.eval, self.parallel)
        self.run.report("checkpointing", self.step, self.total_steps)
        is_best = evaluation is not None and (
            self.best_eval is None or evaluation.loss <= self.best_eval.loss
        )
        if is_best:
            self.best_eval = evaluation
        self.checkpointed_step = self.step
        if not self.parallel.is_main:
            return
        # Without held-out samples the latest checkpoint counts as the best one.
        save_checkpoint(
            self.run.checkpoint_dir,
            step=self.step,
            head=self.head,
            optimizer=self.optimizer,
            state=self._checkpoint_state(),
            is_best=is_best or not self.eval_batches,
            keep_last=self.run.config.keep_checkpoints,
        )

    def _checkpoint_state(self) -> dict[str, Any]:
        """What ``resume`` reads back (and the worker: ``train_seconds`` sizes a resumed job's budget)."""
        return {
            "total_steps": self.total_steps,
            "tokens_trained": self.tokens_trained,
            "train_seconds": self.train_seconds_before + (self.run.clock() - self.loop_started),
            "eval": self.last_eval.model_dump() if self.last_eval else None,
            "best_eval": self.best_eval.model_dump() if self.best_eval else None,
            "last_loss": self.last_loss,
            "last_step_accuracy": self.last_accuracy,
            "train_config": self.run.config.model_dump(mode="json"),
            "head_config": self.head.config.model_dump(mode="json"),
        }

    def stop_reason(self) -> StopReason:
        max_steps = self.run.config.max_steps
        if self.stopped:
            return "stop_requested"
        if self.step < self.step_cap:
            return "time_budget"
        if max_steps is not None and self.step_cap == max_steps:
            return "max_steps"
        return "completed"

    def export(self, best: Path | None) -> Path:
        """Export the head of the best held-out checkpoint (which may predate the last step)."""
        self.run.report("exporting", self.step, self.total_steps)
        with self.run.timed("export"):
            if best is not None:
                load_head_weights(best, self.head)
            config = self.run.config
            return export_head(
                self.head,
                config.out_dir / HEAD_DIRNAME,
                dtype=_DTYPES[config.export_dtype],
                trained_speculative_tokens=config.ttt_steps,
                verifier=str(config.model_dir),
            )

    def summary(self) -> TrainingSummary:
        return TrainingSummary(
            steps=self.step,
            total_steps=self.total_steps,
            epochs_completed=self.step / len(self.order),
            stopped=self.stopped,
            stop_reason=self.stop_reason(),
            resumed_from_step=self.resumed_from_step,
            final_loss=self.last_loss,
            final_step_accuracy=self.last_accuracy,
        )


def _step_cap(config: TrainConfig, batches_per_epoch: int) -> int:
    """The steps of ``epochs`` epochs, at most ``max_steps``; a time budget may plan fewer."""
    cap = max(1, math.ceil(config.epochs * batches_per_epoch))
    return cap if config.max_steps is None else min(cap, config.max_steps)


def _plan_batches(config: TrainConfig, samples: list[TokenizedConversation]) -> list[Batch]:
    lengths = [len(s.input_ids) for s in samples]
    # Recorded features are used only by batches whose every sample has them: a job that also
    # trains on reused (cached) replies must not batch the two kinds together, or it computes
    # again every feature it paid for while distilling (a chained job adopted 0 of 1339 batches).
    recorded = [0 if recorded_features(s) is not None else 1 for s in samples]
    return plan_batches(
        lengths, batch_tokens=config.batch_tokens, max_batch_size=config.max_batch_size, groups=recorded
    )


def _batch_runner(
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


def _adopt_recorded_features(
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


# ---------------------------------------------------------------------- helpers


def load_target(model_dir: Path, device: torch.device) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The frozen target in float32 on ``device`` (bf16 only through autocast) and its tokenizer."""
    if not (model_dir / "config.json").is_file():
        raise ValueError(f"model_dir {model_dir}: no config.json (expected a Hugging Face model directory)")
    target = load_causal_lm(model_dir, device=device, dtype=torch.float32)
    target.requires_grad_(False)
    target.train(False)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return target, tokenizer


def _build_head(
    config: TrainConfig, target: PreTrainedModel, samples: list[TokenizedConversation]
) -> tuple[Eagle3DraftModel, float | None]:
    """A new head with a draft vocabulary ranked on ``samples``, or the init head with its own."""
    if config.init_head_dir is not None:
        head = load_head(config.init_head_dir, target)
        if config.variant is not None and draft_variant(head.config) != config.variant:
            raise ValueError(
                f"the init head {config.init_head_dir} is a {draft_variant(head.config)} head, this run "
                f"trains {config.variant}: fine-tuning keeps the head's variant"
            )
        if config.aux_layer_ids is not None and list(config.aux_layer_ids) != list(head.config.aux_layer_ids):
            raise ValueError(
                f"aux_layer_ids {config.aux_layer_ids} differ from the init head's "
                f"{head.config.aux_layer_ids}; fine-tuning keeps the head's layers"
            )
        return head.train().to(target.device), _coverage(head.t2d.cpu(), samples)
    vocab_size = int(target.config.get_text_config().vocab_size)
    if config.draft_vocab_size is not None and config.draft_vocab_size > vocab_size:
        raise ValueError(
            f"draft_vocab_size {config.draft_vocab_size} exceeds the target's vocabulary ({vocab_size})"
        )
    vocab = _draft_vocab(samples, config.draft_vocab_size, vocab_size)
    resolved_variant = config.variant or default_variant(check_supported(target.config))
    head_config = Eagle3HeadConfig.from_target(
        target.config,
        draft_vocab_size=vocab.draft_vocab_size,
        aux_layer_ids=config.aux_layer_ids,
        variant="eagle2" if resolved_variant == "eagle2" else "eagle3",
    )
    if resolved_variant == "peagle":
        head_config = PEagleHeadConfig(
            **head_config.model_dump(), mask_token_id=default_mask_token_id(target.config)
        )
    head = new_head(head_config)
    head.load_target_embeddings(input_embedding_weight(target).float())
    head.set_draft_vocab(vocab.d2t, vocab.t2d)
    return head.to(target.device), vocab.coverage


# Draft vocabulary sizes tried when none is given; the lm_head's cost grows with the size,
# and a few thousand tokens cover nearly everything a chat model says.
_DRAFT_VOCAB_SIZES = (1024, 2048, 4096, 8192, 16384, 32000)
_DRAFT_VOCAB_COVERAGE = 0.999


def _draft_vocab(samples: list[TokenizedConversation], size: int | None, vocab_size: int) -> DraftVocab:
    if size is not None:
        return build_draft_vocab(samples, draft_vocab_size=size, target_vocab_size=vocab_size)
    largest = min(vocab_size, _DRAFT_VOCAB_SIZES[-1])
    candidates = [s for s in _DRAFT_VOCAB_SIZES if s < largest] + [largest]
    for candidate in candidates:
        vocab = build_draft_vocab(samples, draft_vocab_size=candidate, target_vocab_size=vocab_size)
        if vocab.coverage >= _DRAFT_VOCAB_COVERAGE:
            break
    return vocab


def _coverage(t2d: torch.Tensor, samples: list[TokenizedConversation]) -> float | None:
    masked = [token for s in samples for token, bit in zip(s.input_ids, s.loss_mask, strict=True) if bit]
    if not masked:
        return None
    return float(t2d[torch.tensor(masked)].float().mean())


def use_bf16(compute_dtype: str, device: torch.device) -> bool:
    if compute_dtype == "auto":
        return bf16_matmuls_native(device)
    return compute_dtype == "bfloat16"


def _no_samples_message(data: PreparedData) -> str:
    stats = data.stats
    reason = f" (first error: {stats.first_error})" if stats.first_error else ""
    return (
        f"no training samples: {stats.records_read} records read, {stats.records_skipped} skipped, "
        f"{stats.conversations_heldout} held out, {stats.dropped_no_masked_tokens} without assistant tokens, "
        f"{stats.dropped_template_errors} rejected by the chat template{reason}"
    )
