"""Train an EAGLE-3 draft head for a frozen target model, top to bottom:

setup -> target -> data (load, hold out, regenerate, tokenise) -> draft vocabulary and
head -> optimizer -> batches -> (resume) -> loop (features, TTT loss, step, log,
evaluate + checkpoint, stop flag, time budget) -> export.

``train(config, progress, should_stop)`` is what the worker and ``python -m trainer
train`` call. It returns cleanly (``stopped=True``, after a checkpoint) when
``should_stop()`` turns true, and resumes from the latest checkpoint in ``out_dir``.
"""

from __future__ import annotations

import logging
import math
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from trainer.config import TrainConfig
from trainer.data.tokenize import TokenizedConversation
from trainer.data.vocab import DraftVocab, build_draft_vocab
from trainer.eagle.batch_runner import BatchRunner, TrainOrder
from trainer.eagle.batching import Batch, plan_batches
from trainer.eagle.budget_clock import budget_clock
from trainer.eagle.capture import check_supported, decoder_layers, input_embedding_weight
from trainer.eagle.checkpoint import (
    best_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    load_head_weights,
    save_checkpoint,
)
from trainer.eagle.config import Eagle3HeadConfig, default_aux_layer_ids
from trainer.eagle.data import (
    PREPARED_DIR,
    PreparedData,
    data_fingerprint,
    load_prepared,
    prepare_data,
    save_prepared,
)
from trainer.eagle.export import RUN_HEAD_DIRNAME, export_head, load_head
from trainer.eagle.features import FeatureCache, TargetTeacher
from trainer.eagle.head_init import init_head_from_target
from trainer.eagle.model import Eagle3DraftModel
from trainer.eagle.reporting import (
    EvalMetrics,
    MetricsLog,
    Stage,
    StopReason,
    TrainProgress,
    TrainResult,
    acceptance_length_estimate,
)
from trainer.eagle.schedule import StepTimer, estimate_seconds, learning_rate, steps_that_fit

logger = logging.getLogger(__name__)

ProgressFn = Callable[[TrainProgress], None]
HEAD_DIRNAME = RUN_HEAD_DIRNAME
CHECKPOINT_DIRNAME = "checkpoints"
METRICS_FILE = "metrics.jsonl"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Time kept back from a budget for the final checkpoint and export (plus one evaluation,
# timed as the run goes).
_RESERVE_SECONDS = 15.0


# One readable top-to-bottom loop, nanoGPT style: splitting it would hide the order of events.
def train(  # noqa: PLR0912, PLR0915
    config: TrainConfig,
    progress: ProgressFn | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> TrainResult:
    # ------------------------------------------------------------------ setup
    clock = budget_clock(config.budget_clock)  # every budget and stage time below is on this clock
    wall_started, cpu_started = time.monotonic(), time.process_time()
    started = clock()
    budget = None if config.time_budget_minutes is None else config.time_budget_minutes * 60.0
    stop_requested = should_stop or (lambda: False)
    if config.num_threads is not None:
        torch.set_num_threads(config.num_threads)
    torch.manual_seed(config.seed)
    out_dir = config.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    checkpoint_dir = out_dir / CHECKPOINT_DIRNAME
    if not config.resume:
        # Starting over: an earlier run's checkpoints and samples must not be picked up.
        for stale in (checkpoint_dir, out_dir / PREPARED_DIR):
            shutil.rmtree(stale, ignore_errors=True)
    resume_from = latest_checkpoint(checkpoint_dir)
    stage_seconds: dict[str, float] = {}

    def report(stage: Stage, step: int = 0, total: int = 0, **fields: Any) -> None:
        if progress is not None:
            elapsed = clock() - started
            progress(
                TrainProgress(stage=stage, step=step, total_steps=total, elapsed_seconds=elapsed, **fields)
            )

    # ------------------------------------------------------------------ target
    report("loading_model")
    mark = clock()
    target, tokenizer = _load_target(config.model_dir)
    architecture = check_supported(target.config)
    stage_seconds["load_model"] = clock() - mark

    # ------------------------------------------------------------------ data
    mark = clock()
    fingerprint = data_fingerprint(config)
    data = load_prepared(out_dir, fingerprint)
    if data is None:
        regenerate_deadline = None if budget is None else started + budget * config.regenerate_budget_fraction
        data = prepare_data(
            config,
            target,
            tokenizer,
            report=report,
            should_stop=stop_requested,
            regenerate_deadline=regenerate_deadline,
            regenerate_bf16=_use_bf16(config.compute_dtype),
            clock=clock,
            # A fine-tuned head keeps its own layers, known once it is loaded: its features
            # come from the training pass instead.
            feature_layers=None
            if config.init_head_dir is not None
            else list(config.aux_layer_ids or default_aux_layer_ids(len(decoder_layers(target)))),
        )
        if not data.stopped:
            save_prepared(out_dir, data, fingerprint)
    stage_seconds["data"] = clock() - mark
    if data.stopped:
        report("done")
        return _result(
            config,
            data,
            elapsed=(clock() - started, time.monotonic() - wall_started, time.process_time() - cpu_started),
            stage_seconds=stage_seconds,
            architecture=architecture,
            head_config=None,
            head_dir=None,
            stopped=True,
            stop_reason="stop_requested",
        )
    if not data.train:
        raise ValueError(_no_samples_message(data))

    # ------------------------------------------------------------------ draft vocabulary + head
    use_bf16 = _use_bf16(config.compute_dtype)
    head, vocab_coverage = _build_head(config, target, data.train)
    teacher = TargetTeacher(
        target,
        head.config.aux_layer_ids,
        draft_target_ids=torch.nonzero(head.t2d).flatten(),
        feature_dtype=_DTYPES[config.feature_dtype],
        autocast_bf16=use_bf16,
    )
    if config.init_head_dir is None:
        init_head_from_target(head, target, teacher.draft_lm_head_rows, config.init_from_target)

    # ------------------------------------------------------------------ optimizer
    optimizer = torch.optim.AdamW(
        _parameter_groups(head, config.weight_decay), lr=config.lr, betas=(0.9, 0.95), eps=1e-8
    )

    # ------------------------------------------------------------------ batches
    def batches_of(samples: list[TokenizedConversation]) -> list[Batch]:
        lengths = [len(s.input_ids) for s in samples]
        return plan_batches(lengths, batch_tokens=config.batch_tokens, max_batch_size=config.max_batch_size)

    order = TrainOrder(batches_of(data.train), seed=config.seed)
    eval_batches = batches_of(data.eval)
    timer = StepTimer()
    runner = BatchRunner(
        head,
        teacher,
        cache=FeatureCache(int(config.feature_cache_gb * 2**30) if config.feature_cache else 0),
        timer=timer,
        pad_id=int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0),
        ttt_steps=config.ttt_steps,
        ttt_decay=config.ttt_decay,
        autocast_bf16=use_bf16,
        clock=clock,
    )
    # Features recorded while distilling go straight into the cache, so the schedule plans
    # those batches as cached.
    adopted = runner.adopt_recorded_features(
        [(f"train-{i}", b) for i, b in enumerate(order.batches)], data.train
    )
    runner.adopt_recorded_features([(f"eval-{i}", b) for i, b in enumerate(eval_batches)], data.eval)
    logger.info("%d of %d training batches use features recorded while distilling", adopted, len(order))
    step_cap = max(1, math.ceil(config.epochs * len(order)))
    if config.max_steps is not None:
        step_cap = min(step_cap, config.max_steps)
    total_steps = step_cap  # re-planned under a time budget

    # ------------------------------------------------------------------ resume
    step = 0
    best_eval: EvalMetrics | None = None
    last_eval: EvalMetrics | None = None
    tokens_trained = 0
    train_seconds_before = 0.0
    resumed_from_step: int | None = None
    if resume_from is not None:
        state = load_checkpoint(resume_from, head=head, optimizer=optimizer)
        step = resumed_from_step = int(state["step"])
        total_steps = max(int(state["total_steps"]), step)
        best_eval = EvalMetrics(**state["best_eval"]) if state.get("best_eval") else None
        last_eval = EvalMetrics(**state["eval"]) if state.get("eval") else None
        tokens_trained = int(state.get("tokens_trained", 0))
        train_seconds_before = float(state.get("train_seconds", 0.0))
        logger.info("resumed from %s at step %d of %d", resume_from, step, total_steps)
    metrics = MetricsLog(out_dir / METRICS_FILE, keep_through_step=resumed_from_step)

    def checkpoint(evaluation: EvalMetrics | None) -> None:
        nonlocal best_eval
        report("checkpointing", step, total_steps)
        is_best = evaluation is not None and (best_eval is None or evaluation.loss <= best_eval.loss)
        if is_best:
            best_eval = evaluation
        state = {
            "total_steps": total_steps,
            "tokens_trained": tokens_trained,
            "train_seconds": train_seconds_before + (clock() - loop_started),
            "eval": evaluation.model_dump() if evaluation else None,
            "best_eval": best_eval.model_dump() if best_eval else None,
            "last_loss": last_loss,
            "last_step_accuracy": last_accuracy,
            "train_config": config.model_dump(mode="json"),
            "head_config": head.config.model_dump(mode="json"),
        }
        # Without held-out samples the latest checkpoint counts as the best one.
        save_checkpoint(
            checkpoint_dir,
            step=step,
            head=head,
            optimizer=optimizer,
            state=state,
            is_best=is_best or not eval_batches,
            keep_last=config.keep_checkpoints,
        )

    # ------------------------------------------------------------------ training loop
    head.train()
    stopped = False
    last_loss: float | None = None
    last_accuracy: list[float] = []
    loop_started = clock()

    def train_deadline() -> float | None:
        if budget is None:
            return None
        return started + budget - min(_RESERVE_SECONDS, 0.1 * budget) - timer.eval_seconds

    evals_per_step = 1.0 / config.checkpoint_every if eval_batches else 0.0
    eta: tuple[float, float] | None = None  # (estimate, when it was made)
    bar = tqdm(total=total_steps, initial=step, disable=not sys.stderr.isatty(), desc="train", unit="step")
    while step < total_steps:
        began = clock()
        key, batch = order.batch_at(step)
        lr = learning_rate(
            step,
            total_steps=total_steps,
            peak=config.lr,
            warmup_steps=config.warmup_steps,
            min_ratio=config.min_lr_ratio,
        )
        for group in optimizer.param_groups:
            group["lr"] = lr

        tensors, features = runner.features(key, data.train, batch)
        head_began = clock()
        out = runner.loss(tensors, features)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()  # type: ignore[no-untyped-call]
        grad_norm = torch.nn.utils.clip_grad_norm_(head.parameters(), config.grad_clip)
        optimizer.step()
        step += 1
        now = clock()
        timer.record_head(now - head_began, batch.padded_tokens)

        real_tokens = int(tensors.attention_mask.sum())
        tokens_trained += real_tokens
        last_loss, last_accuracy = float(out.loss.detach()), out.step_accuracy
        metrics.write(
            {
                "step": step,
                "epoch": step / len(order),
                "loss": last_loss,
                "step_losses": out.step_losses,
                "step_accuracy": out.step_accuracy,
                "acceptance_length_estimate": acceptance_length_estimate(out.step_accuracy),
                "masked_tokens": out.step_counts[0],
                "lr": lr,
                "grad_norm": float(grad_norm),
                "tokens": real_tokens,
                "step_seconds": now - began,
                "feature_seconds": head_began - began,
                "elapsed": now - started,
            }
        )

        # Under a time budget, size the schedule to the steps that still fit; re-planned
        # as the timings settle (the first epoch also pays for the target's features).
        if step <= 10 or step % 10 == 0:
            upcoming = partial(order.upcoming, step, step_cap, runner.cache, runner.feature_bytes_per_token)
            deadline = train_deadline()
            if deadline is not None:
                fit = steps_that_fit(
                    upcoming(), seconds=deadline - now, timer=timer, evals_per_step=evals_per_step
                )
                if fit is not None:
                    total_steps = max(step + 1, min(step_cap, step + fit))
                    bar.total = total_steps
            estimate = estimate_seconds(
                upcoming(), steps=total_steps - step, timer=timer, evals_per_step=evals_per_step
            )
            eta = None if estimate is None else (estimate, now)
        # The last step has nothing left to estimate; an estimate made steps ago and counted
        # down since would still show what a faster-than-predicted run left over.
        eta_seconds = None if eta is None else max(0.0, eta[0] - (now - eta[1]))
        report(
            "training",
            step,
            total_steps,
            loss=last_loss,
            step_accuracy=out.step_accuracy,
            lr=lr,
            tokens_per_s=real_tokens / max(now - began, 1e-9),
            eta_seconds=0.0 if step >= total_steps else eta_seconds,
        )
        bar.update(1)
        bar.set_postfix(loss=f"{last_loss:.3f}", acc0=f"{out.step_accuracy[0]:.2f}")

        if step % config.checkpoint_every == 0 and step < total_steps:
            report("evaluating", step, total_steps)
            last_eval = runner.evaluate(eval_batches, data.eval)
            checkpoint(last_eval)
        if stop_requested():
            stopped = True
            break
        deadline = train_deadline()
        if deadline is not None and clock() >= deadline:
            break
    bar.close()
    stage_seconds["train"] = clock() - loop_started
    stop_reason: StopReason
    if stopped:
        stop_reason = "stop_requested"
    elif step < step_cap:
        stop_reason = "time_budget"
    elif config.max_steps is not None and step_cap == config.max_steps:
        stop_reason = "max_steps"
    else:
        stop_reason = "completed"

    # ------------------------------------------------------------------ final checkpoint and export
    saved = latest_checkpoint(checkpoint_dir)
    if step > 0 and (saved is None or saved.name != f"step-{step:08d}"):
        report("evaluating", step, total_steps)
        last_eval = runner.evaluate(eval_batches, data.eval)
        checkpoint(last_eval)
    best = best_checkpoint(checkpoint_dir)
    exported: Path | None = None
    if not stopped:
        # A stopped run is resumed later, not published.
        report("exporting", step, total_steps)
        mark = clock()
        if best is not None:
            # The best held-out checkpoint may predate the last step.
            load_head_weights(best, head)
        exported = export_head(head, out_dir / HEAD_DIRNAME, dtype=_DTYPES[config.export_dtype])
        stage_seconds["export"] = clock() - mark
    train_seconds = train_seconds_before + stage_seconds["train"]
    report("done", step, total_steps)
    return _result(
        config,
        data,
        elapsed=(clock() - started, time.monotonic() - wall_started, time.process_time() - cpu_started),
        stage_seconds=stage_seconds,
        architecture=architecture,
        head_config=head.config,
        head_dir=exported,
        best=best,
        steps=step,
        total_steps=total_steps,
        epochs_completed=step / len(order),
        stopped=stopped,
        stop_reason=stop_reason,
        resumed_from_step=resumed_from_step,
        final_loss=last_loss,
        final_step_accuracy=last_accuracy,
        final_eval=last_eval,
        best_eval=best_eval,
        vocab_coverage=vocab_coverage,
        tokens_trained=tokens_trained,
        train_seconds=train_seconds,
    )


def _result(
    config: TrainConfig,
    data: PreparedData,
    *,
    elapsed: tuple[float, float, float],  # (budget clock, wall, CPU) seconds since the start
    stage_seconds: dict[str, float],
    architecture: str,
    head_config: Eagle3HeadConfig | None,
    head_dir: Path | None,
    best: Path | None = None,
    steps: int = 0,
    total_steps: int = 0,
    epochs_completed: float = 0.0,
    stopped: bool,
    stop_reason: StopReason,
    resumed_from_step: int | None = None,
    final_loss: float | None = None,
    final_step_accuracy: list[float] | None = None,
    final_eval: EvalMetrics | None = None,
    best_eval: EvalMetrics | None = None,
    vocab_coverage: float | None = None,
    tokens_trained: int = 0,
    train_seconds: float = 0.0,
) -> TrainResult:
    stats = data.stats
    out_dir = config.out_dir
    return TrainResult(
        out_dir=str(out_dir),
        head_dir=str(head_dir) if head_dir else None,
        metrics_path=str(out_dir / METRICS_FILE),
        checkpoint_dir=str(out_dir / CHECKPOINT_DIRNAME),
        best_checkpoint=str(best) if best else None,
        steps=steps,
        total_steps=total_steps,
        epochs_completed=epochs_completed,
        stopped=stopped,
        stop_reason=stop_reason,
        resumed_from_step=resumed_from_step,
        final_loss=final_loss,
        final_step_accuracy=final_step_accuracy or [],
        final_eval=final_eval,
        best_eval=best_eval,
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
        draft_vocab_size=head_config.draft_vocab_size if head_config else 0,
        draft_vocab_coverage=vocab_coverage,
        aux_layer_ids=list(head_config.aux_layer_ids) if head_config else [],
        target_architecture=architecture,
        tokens_trained=tokens_trained,
        train_tokens_per_s=tokens_trained / train_seconds if train_seconds > 0 else 0.0,
        stage_seconds=stage_seconds,
        seconds=elapsed[0],
        wall_seconds=elapsed[1],
        cpu_seconds=elapsed[2],
        budget_clock=config.budget_clock,
        hyperparameters=config.model_dump(mode="json"),
        data_stats=asdict(stats),
    )


# ---------------------------------------------------------------------- helpers


def _load_target(model_dir: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The frozen target in float32 (CPU training) and its tokenizer."""
    if not (model_dir / "config.json").is_file():
        raise ValueError(f"model_dir {model_dir}: no config.json (expected a Hugging Face model directory)")
    target = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
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
        if config.aux_layer_ids is not None and list(config.aux_layer_ids) != list(head.config.aux_layer_ids):
            raise ValueError(
                f"aux_layer_ids {config.aux_layer_ids} differ from the init head's "
                f"{head.config.aux_layer_ids}; fine-tuning keeps the head's layers"
            )
        return head.train(), _coverage(head.t2d, samples)
    vocab_size = int(target.config.get_text_config().vocab_size)
    if config.draft_vocab_size is not None and config.draft_vocab_size > vocab_size:
        raise ValueError(
            f"draft_vocab_size {config.draft_vocab_size} exceeds the target's vocabulary ({vocab_size})"
        )
    vocab = _draft_vocab(samples, config.draft_vocab_size, vocab_size)
    head_config = Eagle3HeadConfig.from_target(
        target.config, draft_vocab_size=vocab.draft_vocab_size, aux_layer_ids=config.aux_layer_ids
    )
    head = Eagle3DraftModel(head_config)
    head.load_target_embeddings(input_embedding_weight(target).float())
    head.set_draft_vocab(vocab.d2t, vocab.t2d)
    return head, vocab.coverage


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


def _parameter_groups(head: Eagle3DraftModel, weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices only; norms are scales that decay would pull towards zero."""
    trainable = [p for p in head.parameters() if p.requires_grad]
    return [
        {"params": [p for p in trainable if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0},
    ]


def _use_bf16(compute_dtype: str) -> bool:
    if compute_dtype == "auto":
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return compute_dtype == "bfloat16"


def _no_samples_message(data: PreparedData) -> str:
    stats = data.stats
    reason = f" (first error: {stats.first_error})" if stats.first_error else ""
    return (
        f"no training samples: {stats.records_read} records read, {stats.records_skipped} skipped, "
        f"{stats.conversations_heldout} held out, {stats.dropped_no_masked_tokens} without assistant tokens, "
        f"{stats.dropped_template_errors} rejected by the chat template{reason}"
    )
