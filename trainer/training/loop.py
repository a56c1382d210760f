"""The training loop: one optimizer step after another until the schedule ends, a stop is
requested or the time budget is spent; evaluation and checkpoints inside it."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm
from transformers import PreTrainedTokenizerBase

from engine.heads.model import Eagle3DraftModel
from trainer.eagle.batch_runner import BatchRunner, TrainOrder
from trainer.eagle.batching import Batch
from trainer.eagle.checkpoint import (
    load_checkpoint,
    save_checkpoint,
)
from trainer.eagle.data_parallel import DataParallel
from trainer.eagle.features import TargetTeacher
from trainer.eagle.optimizer import HeadOptimizer, build_optimizer
from trainer.eagle.prepared import PreparedData
from trainer.eagle.reporting import (
    EvalMetrics,
    MetricsLog,
    StopReason,
    TrainingSummary,
    acceptance_length_estimate,
)
from trainer.eagle.schedule import estimate_seconds, learning_rate, steps_that_fit
from trainer.eagle.ttt import TTTOutput
from trainer.training.batches import (
    adopt_recorded_features,
    new_batch_runner,
    plan_run_batches,
    planned_step_cap,
)
from trainer.training.head import export_best_head
from trainer.training.run import METRICS_FILE, Run

logger = logging.getLogger(__name__)


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
class Trainer:
    """The head's optimisation: the head and optimizer, the batches, and how far it got."""

    run: Run
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
        run: Run,
        head: Eagle3DraftModel,
        teacher: TargetTeacher,
        tokenizer: PreTrainedTokenizerBase,
        data: PreparedData,
        *,
        parallel: DataParallel,
    ) -> Trainer:
        config = run.config
        optimizer = build_optimizer(
            head, name=config.optimizer, lr=config.lr, weight_decay=config.weight_decay
        )
        order = TrainOrder(plan_run_batches(config, data.train), seed=config.seed)
        eval_batches = plan_run_batches(config, data.eval)
        runner = new_batch_runner(config, head, teacher, tokenizer, run.clock)
        adopt_recorded_features(runner, order, eval_batches, data, parallel)
        step_cap = planned_step_cap(config, len(order))
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
        self.run.report("exporting", self.step, self.total_steps)
        with self.run.timed("export"):
            return export_best_head(self.run.config, self.head, best)

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
