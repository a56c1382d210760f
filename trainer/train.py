"""Train an EAGLE-3 draft head for a frozen target model. ``train`` reads top to bottom:

start (clocks, seed, output directory) -> target -> data (load, hold out, regenerate,
tokenise) -> draft vocabulary and head -> trainer (optimizer, batches) -> resume -> loop
(features, TTT loss, step, log, evaluate + checkpoint, stop flag, time budget) -> last
checkpoint -> export -> result. Each stage lives in ``trainer.training``: ``run`` (what every
step shares: config, budget clock, callbacks), ``data``, ``head``, ``batches`` (the plan) and
``loop`` (``Trainer``: the head's optimisation and how far it got).

``train(config, progress, should_stop)`` is what the worker and ``python -m trainer
train`` call. It returns cleanly (``stopped=True``, after a checkpoint) when
``should_stop()`` turns true, and resumes from the latest checkpoint in ``out_dir``.

With ``nproc`` > 1 the caller is rank 0 of a data-parallel run (``trainer.eagle.data_parallel``):
it prepares the data, starts the other ranks (``train_as_helper`` in their processes), and
alone writes metrics, checkpoints and the head; its decisions (schedule, stop) bind them all.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from trainer.config import TrainConfig
from trainer.device import resolve_device
from trainer.eagle.checkpoint import best_checkpoint, latest_checkpoint
from trainer.eagle.data_parallel import DataParallel
from trainer.eagle.prepared import PREPARED_DIR, data_fingerprint, load_prepared
from trainer.eagle.process_group import check_gpu_per_rank, data_parallel_group
from trainer.eagle.reporting import Evaluation, TrainResult
from trainer.training.data import (
    load_or_prepare_data,
    load_target,
    load_target_timed,
    no_samples_message,
    use_bf16,
)
from trainer.training.head import build_head, new_teacher
from trainer.training.loop import Trainer
from trainer.training.run import (
    CHECKPOINT_DIRNAME,
    HEAD_DIRNAME,
    METRICS_FILE,
    ProgressFn,
    head_summary,
    run_result,
    start_run,
    stopped_before_training,
)

# Other modules import these from here, where they have always been.
__all__ = [
    "CHECKPOINT_DIRNAME",
    "HEAD_DIRNAME",
    "METRICS_FILE",
    "ProgressFn",
    "load_target",
    "train",
    "train_as_helper",
    "use_bf16",
]


def train(
    config: TrainConfig,
    progress: ProgressFn | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> TrainResult:
    run = start_run(config, progress, should_stop)
    # The group checks this only once the data is ready: after a distillation of hours on the
    # GPU, a run with more ranks than GPUs would fail then, its replies paid for nothing.
    check_gpu_per_rank(config.nproc, resolve_device(config.device))
    target, tokenizer, architecture = load_target_timed(run)
    data = load_or_prepare_data(run, target, tokenizer)
    if data.stopped:
        run.report("done")
        return stopped_before_training(run, data, architecture)
    if not data.train:
        raise ValueError(no_samples_message(data, config))
    head, vocab_coverage = build_head(config, target, data.train)
    teacher = new_teacher(config, target, head)
    share_cores(config)
    with data_parallel_group(config, target.device) as parallel:
        trainer = Trainer.create(run, head, teacher, tokenizer, data, parallel=parallel)
        trainer.resume(latest_checkpoint(run.checkpoint_dir))
        trainer.loop()
        trainer.checkpoint_last_step()
    best = best_checkpoint(run.checkpoint_dir)
    # A stopped run is resumed later, not published.
    head_dir = None if trainer.stopped else trainer.export(best)
    run.report("done", trainer.step, trainer.total_steps)
    return run_result(
        run,
        data,
        files=run.files(head_dir=head_dir, best=best),
        training=trainer.summary(),
        evaluation=Evaluation(final_eval=trainer.last_eval, best_eval=trainer.best_eval),
        head=head_summary(architecture, head.config, vocab_coverage),
        tokens_trained=trainer.tokens_trained,
        train_seconds=trainer.train_seconds,
    )


def train_as_helper(config: TrainConfig, parallel: DataParallel) -> None:
    """Rank ``parallel.rank`` > 0 of a data-parallel run: the samples rank 0 prepared, the
    same head and schedule, its share of every batch; it writes nothing."""
    run = start_run(config, None, None, clean=False)
    share_cores(config)
    target, tokenizer = load_target(config.model_dir, parallel.device)
    data = load_prepared(config.out_dir, data_fingerprint(config))
    if data is None:
        raise RuntimeError(f"{config.out_dir / PREPARED_DIR}: rank 0 prepared no samples for this run")
    head, _ = build_head(config, target, data.train)
    trainer = Trainer.create(run, head, new_teacher(config, target, head), tokenizer, data, parallel=parallel)
    trainer.resume(latest_checkpoint(run.checkpoint_dir))
    trainer.loop()
    trainer.checkpoint_last_step()


def share_cores(config: TrainConfig) -> None:
    """N CPU ranks without num_threads split torch's threads between them instead of each taking
    them all (oversubscribed cores make every rank wait for the slowest). Rank 0 prepared the data
    with all of them first."""
    if config.nproc > 1 and config.num_threads is None:
        torch.set_num_threads(max(1, torch.get_num_threads() // config.nproc))
