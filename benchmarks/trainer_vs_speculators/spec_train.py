"""Run speculators 0.9.0's own `speculators train` (cli.main) under a wall-clock deadline.

Runs in the speculators venv (run_speculators.sh starts it):

    spec-venv/bin/python spec_train.py DEADLINE_UNIX STATS_JSON -- <speculators train flags...>

Everything (config resolution, vocab mapping from token_freq.pt, model build, Muon+AdamW,
linear schedule, multipack 512-token batches, TTT loss, checkpointing) is speculators' code.
The only addition is a Trainer subclass that:
  * re-estimates, after every optimizer step, how many steps fit before DEADLINE from the
    median of the last 20 measured step times, and moves the linear schedule's horizon
    (num_training_steps) and the trainer's max_steps to that estimate, so the LR decays
    to ~0 exactly when time runs out (warmup stays at 1% of the first estimate);
  * stops at the deadline in any case (hard wall-clock guard);
  * after the stop: saves the checkpoint once (speculators' epoch-end save), then leaves
    the epoch loop (no validation pass, no further epochs);
  * counts steps and trained (non-pad) tokens for the summary.
Threads: THREADS in the environment (default 1).
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

STEP_WINDOW = 20  # step times the horizon estimate takes the median of
MIN_MEASURED_STEPS = 3  # before this many, the first guess (--max-steps) stands


class BudgetDone(Exception):  # noqa: N818 - a signal to stop, not an error
    """Raised after the final checkpoint is saved, to leave speculators' epoch loop."""


def main() -> None:
    deadline = float(sys.argv[1])
    stats_path = sys.argv[2]
    assert sys.argv[3] == "--"
    train_argv = sys.argv[4:]
    t0 = time.time()
    torch.set_num_threads(int(os.environ.get("THREADS", "1")))

    # Imported after t0, as in the measured runs, so trainer_ready_s includes speculators' import;
    # and only here because this file is type-checked in eaglenest's venv, which has no speculators.
    import speculators.train.cli as spec_cli  # type: ignore[import-not-found]  # noqa: PLC0415
    from speculators.train.config import TrainConfig  # type: ignore[import-not-found]  # noqa: PLC0415
    from speculators.train.trainer import Trainer  # type: ignore[import-not-found]  # noqa: PLC0415
    from transformers.optimization import (  # noqa: PLC0415
        _get_linear_schedule_with_warmup_lr_lambda,
    )

    stats: dict[str, Any] = {"steps": 0, "tokens_trained": 0, "stopped_by": None}
    holder: list[Any] = []

    class BudgetTrainer(Trainer):  # type: ignore[misc]  # speculators is untyped here
        config: Any  # speculators' TrainerConfig (a NamedTuple: _replace below), set by Trainer.__init__

        def __init__(self, model: Any, config: Any, train_loader: Any, val_loader: Any = None) -> None:
            self._stopped = False
            self._saved_after_stop = False
            self._last_t: float | None = None
            self._durations: list[float] = []
            self._losses: list[float] = []
            super().__init__(model, config, train_loader, val_loader)
            holder.append(self)
            self._warmup = config.max_steps // 100 if config.max_steps else 0
            stats["steps_per_epoch"] = len(train_loader)
            stats["initial_max_steps"] = config.max_steps
            stats["trainer_ready_s"] = round(time.time() - t0, 2)

            def count(module: torch.nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
                if module.training:
                    stats["tokens_trained"] += int((kwargs["document_ids"] != -1).sum())

            def grab(module: torch.nn.Module, args: Any, kwargs: dict[str, Any], output: Any) -> None:
                if module.training:
                    self._losses.append(float(output[1].detach()))

            model.register_forward_pre_hook(count, with_kwargs=True)
            model.register_forward_hook(grab, with_kwargs=True)

        def _schedulers_step(self) -> None:
            now = time.time()
            if self._last_t is not None:
                self._durations.append(now - self._last_t)
            self._last_t = now
            step = self.global_step + 1  # steps done after this one
            if now >= deadline:
                total = step
                self._stopped = True
                stats["stopped_by"] = "wall_clock"
            elif len(self._durations) >= MIN_MEASURED_STEPS:
                median = statistics.median(self._durations[-STEP_WINDOW:])
                total = step + max(0, int((deadline - now) / median))
            else:
                total = self.config.max_steps
            if total != self.config.max_steps:
                self.config = self.config._replace(max_steps=total)
                for scheduler in self.schedulers:
                    scheduler.lr_lambdas = [
                        functools.partial(
                            _get_linear_schedule_with_warmup_lr_lambda,
                            num_warmup_steps=self._warmup,
                            num_training_steps=max(total, self._warmup + 1),
                        )
                        for _ in scheduler.lr_lambdas
                    ]
            if step >= total:
                self._stopped = True
                stats["stopped_by"] = stats["stopped_by"] or "estimated_steps_reached"
            super()._schedulers_step()
            stats["steps"] = step
            stats["last_lr"] = self.optimizers[0].param_groups[0]["lr"]

        def train_epoch(self, epoch: int, **kwargs: Any) -> Any:
            if self._stopped:
                return None
            return super().train_epoch(epoch, **kwargs)

        def val_epoch(self, epoch: int) -> Any:
            if self._stopped:
                return None
            t = time.time()
            out = super().val_epoch(epoch)
            stats.setdefault("val_s", 0.0)
            stats["val_s"] += time.time() - t
            if out:
                stats["last_val"] = out
            return out

        def maybe_save_checkpoint(self, epoch: int, local_step: int = 0) -> None:
            if self._saved_after_stop:
                return
            if self._stopped:
                self._saved_after_stop = True
            t = time.time()
            super().maybe_save_checkpoint(epoch, local_step=local_step)
            stats.setdefault("save_s", 0.0)
            stats["save_s"] += time.time() - t
            stats["last_checkpoint_epoch"] = epoch
            if self._stopped:
                raise BudgetDone  # skip validation and the remaining (empty) epochs

    spec_cli.Trainer = BudgetTrainer
    config = TrainConfig.resolve(train_argv)
    try:
        spec_cli.main(config)
    except BudgetDone:
        pass
    finally:
        stats["train_process_s"] = round(time.time() - t0, 2)
        if holder:
            trainer = holder[0]
            if trainer._durations:
                stats["step_s_median"] = round(statistics.median(trainer._durations), 4)
                stats["step_s_mean"] = round(sum(trainer._durations) / len(trainer._durations), 4)
            stats["loss_first10"] = trainer._losses[:10]
            stats["loss_last10"] = trainer._losses[-10:]
        Path(stats_path).write_text(json.dumps(stats, indent=1, default=str))


if __name__ == "__main__":
    main()
