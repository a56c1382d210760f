"""Stage 'train': train (or fine-tune) the EAGLE-3 head with ``trainer.train``.

The four SageMaker workflows are one call with different inputs: built-in or own data
(stage 'data'), from scratch or from an existing head (``init_head_dir``: the ``eagle_model``
channel's, or for own data the model's base head from stage 'base').
Checkpoints are mirrored to the job's staging prefix as the trainer writes them, so a
redelivered job resumes from the last one; once training has finished, its result and the
exported head are staged too and a redelivered job skips straight past this stage.
With a distillation cache (worker.distillation_cache), a job that distils first downloads
what earlier jobs distilled for the same key, and adds what it distilled itself.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from core.head_files import HEAD_FILES, OPTIONAL_HEAD_FILES
from core.job_errors import JobFailedError
from core.output_layout import HEAD_DIR, TRAIN_RESULT, TRAIN_RUN, TRAINING_METRICS
from core.s3 import S3Location, s3_client
from core.s3_store import S3Store
from trainer.config import TrainConfig
from trainer.device import resolve_device
from trainer.eagle.data import HELDOUT_FILE, REGENERATED_FILE
from trainer.eagle.prepared import PREPARED_DIR, data_fingerprint
from trainer.eagle.process_group import check_gpu_per_rank
from trainer.eagle.reporting import TrainResult
from trainer.train import HEAD_DIRNAME, METRICS_FILE, train
from worker.artifacts import FannedOutDistillation, HeadInput, TrainOutput, required
from worker.context import JobContext
from worker.distillation_cache import JobCacheUse
from worker.run_sync import RunDirectorySync
from worker.train_plan import build_train_config, training_budget_minutes
from worker.training_progress import TrainingProgress

logger = logging.getLogger(__name__)

RUN_DIRNAME = "train"
DISTILLED_DIRNAME = "distillation-cache"  # the cache's parts this job reads, beside the run directory
FANNED_OUT_FILE = "fanned-out-distilled.jsonl"  # the shards' records together, as the job's cache part


def train_head(ctx: JobContext) -> None:
    run_dir = ctx.work_dir / RUN_DIRNAME
    sync = RunDirectorySync(ctx.s3, ctx.layout.staged(TRAIN_RUN), run_dir)
    if ctx.s3.head(ctx.layout.staged(TRAIN_RESULT)) is not None:
        _reuse_finished_training(ctx, sync)
        return
    ctx.report("Looking for a checkpoint of an earlier run of this job", fraction=0.0)
    state = sync.restore()
    trained_seconds = float(state.get("train_seconds") or 0.0) if state else 0.0
    if state is not None:
        ctx.report(f"Resuming from the checkpoint at step {state['step']} (mirrored on S3)", fraction=0.0)
    if ctx.artifacts.distilled is not None:
        # EAGLE_TRAIN_MAX_MINUTES covers distilling too, as it does when the trainer distils.
        trained_seconds += float(ctx.artifacts.distilled.summary["seconds"])
    budget = training_budget_minutes(
        ctx.knobs, seconds_left=ctx.seconds_left(), trained_seconds=trained_seconds
    )
    config = job_train_config(ctx, run_dir, budget)
    cache = open_distillation_cache(ctx, config)
    if cache is not None:
        ctx.report(
            f"Distillation cache entry {cache.key}: reusing {len(cache.reused_parts)} parts", fraction=0.0
        )
        config = config.model_copy(
            update={"distilled_paths": cache.download(ctx.work_dir / DISTILLED_DIRNAME)}
        )
    fanned = ctx.artifacts.distilled
    if fanned is not None:
        # Stage 'distil' wrote every reply: the trainer trains on the shards' records.
        config = config.model_copy(
            update={
                "distilled_paths": [*config.distilled_paths, *fanned.shard_files],
                "distilled_elsewhere": True,
            }
        )
    _drop_prepared_samples_of_other_inputs(run_dir, data_fingerprint(config))
    progress = TrainingProgress(
        ctx, budget_seconds=None if budget is None else budget * 60, on_step=sync.sync
    )
    try:
        result = train(config, progress, ctx.should_stop)
    except ValueError as error:
        raise JobFailedError(f"Training failed: {_with_uris(ctx, str(error))}") from error
    finally:
        progress.save_points()  # the steps since the last report, also of a stopped run
    sync.sync()
    if result.training.stopped:
        ctx.check()  # raises the stop request or the deadline that made the trainer stop
        raise RuntimeError("the trainer stopped although neither a stop nor the deadline was reached")
    if result.files.head_dir is None:
        raise RuntimeError("the trainer finished without exporting a head")
    _stage_outputs(ctx, run_dir, result, cache)


def job_train_config(ctx: JobContext, run_dir: Path, budget_minutes: float | None) -> TrainConfig:
    model = required(ctx.artifacts.model, "the base model")
    data = required(ctx.artifacts.data, "the training data")
    head = init_head(ctx)
    config = build_train_config(
        ctx.knobs,
        overrides=ctx.settings.train_overrides,
        model_dir=required(model.local_dir, "the cached base model"),
        data_files=data.files,
        run_dir=run_dir,
        init_head_dir=None if head is None else head.local_dir,
        budget_minutes=budget_minutes,
        builtin_data=data.kind == "BuiltIn",
        nproc=ctx.settings.train_nproc,
        device=ctx.settings.device,
    )
    # Before anything distils: stage 'distil' fans the replies out over every worker of the queue
    # before training would find that this worker cannot start its ranks.
    try:
        check_gpu_per_rank(config.nproc, resolve_device(config.device))
    except ValueError as error:
        raise JobFailedError(
            f"This worker cannot train (EAGLENEST_DEVICE, EAGLENEST_TRAIN_NPROC): {error}"
        ) from None
    return config


def init_head(ctx: JobContext) -> HeadInput | None:
    """The head training starts from: the eagle_model channel's; the model's base head for a job
    that brings its own data (fine-tuned on it, as SageMaker fine-tunes its base); else none.

    A job on the built-in data trains its own head from scratch (the base head learnt that data
    already), EAGLE_DRAFT_VOCAB_SIZE asks for a vocabulary of its own, which fine-tuning
    cannot give (it keeps the base head's), and an EAGLE_VARIANT other than the base head's
    (eagle2 or peagle on a model whose base head is an EAGLE-3 chain) a head of another kind.
    """
    head = ctx.artifacts.base_head
    if head is None or head.origin == "eagle_model":
        return head
    data = required(ctx.artifacts.data, "the training data")
    if data.kind == "BuiltIn" or ctx.knobs.draft_vocab_size is not None:
        return None
    if ctx.knobs.variant is not None and ctx.knobs.variant != base_head_variant(head):
        return None
    return head


def base_head_variant(head: HeadInput) -> str:
    """The variant of a base head: validation records it (heads validated before it did are EAGLE-3)."""
    return str(head.summary.get("draft_variant", "eagle3"))


def open_distillation_cache(ctx: JobContext, config: TrainConfig) -> JobCacheUse | None:
    """The operator's distillation cache, for a job that distils; None without either."""
    uri = ctx.settings.distillation_cache_uri
    if uri is None or not config.regenerate:
        return None
    model = required(ctx.artifacts.model, "the base model")
    # The service's own identity, not the job's role: the cache is shared by every account.
    store = S3Store(s3_client(ctx.settings, region=ctx.job.region))
    return JobCacheUse.open(
        store,
        S3Location.parse(uri, field="EAGLENEST_DISTILLATION_CACHE_URI"),
        job=ctx.job,
        model=model.snapshot,
        model_uri=model.location.uri,
        data=required(ctx.artifacts.data, "the training data").snapshot,
        config=config,
    )


def _drop_prepared_samples_of_other_inputs(run_dir: Path, fingerprint: str) -> None:
    """Restored samples prepared from other local paths (another cache directory) would be
    refused by the trainer; it prepares them again from the same data instead."""
    summary = run_dir / PREPARED_DIR / "summary.json"
    if summary.is_file() and json.loads(summary.read_text()).get("fingerprint") != fingerprint:
        logger.info("prepared samples in %s came from other inputs; preparing them again", run_dir)
        for path in (run_dir / PREPARED_DIR).iterdir():
            path.unlink()


def _stage_outputs(ctx: JobContext, run_dir: Path, result: TrainResult, cache: JobCacheUse | None) -> None:
    layout = ctx.layout
    head_dir = run_dir / HEAD_DIRNAME
    ctx.report("Staging the trained head and its metrics", fraction=0.99)
    optional = [name for name in OPTIONAL_HEAD_FILES if (head_dir / name).is_file()]
    for name in (*HEAD_FILES, *optional):
        ctx.s3.upload_file(head_dir / name, layout.staged(HEAD_DIR + name))
    ctx.s3.upload_file(run_dir / METRICS_FILE, layout.staged(TRAINING_METRICS))
    document = result.model_dump(mode="json")
    fanned = ctx.artifacts.distilled
    if fanned is not None:
        document["distillation_fanout"] = fanned.summary
    if cache is not None:
        # Before the marker: a job redelivered after this point adds (rewrites) the same part again.
        distilled, stats = run_dir / REGENERATED_FILE, document["data_stats"]
        if fanned is not None:
            distilled, stats = fanned_out_part(run_dir, fanned, stats)
        document["distillation_cache"] = cache.publish(distilled, stats)
    # The marker goes last: its presence means the head and metrics above are complete.
    ctx.s3.put_json(document, layout.staged(TRAIN_RESULT))
    _set_output(ctx, run_dir, document)
    training = result.training
    ctx.report(
        f"Trained {training.steps} steps ({training.stop_reason}); final loss "
        f"{training.final_loss if training.final_loss is not None else 'n/a'}",
        fraction=1.0,
    )


def fanned_out_part(
    run_dir: Path, fanned: FannedOutDistillation, data_stats: dict[str, Any]
) -> tuple[Path, dict[str, Any]]:
    """The shards' records as the job's one cache part, and the data stats with the shards
    counted as this job's distillation rather than as reused records."""
    part = run_dir / FANNED_OUT_FILE
    with part.open("w", encoding="utf-8") as handle:
        for path in fanned.shard_files:
            handle.write(path.read_text(encoding="utf-8"))
    shard_names = {path.name for path in fanned.shard_files}
    by_file = dict(data_stats.get("distilled_reused_by_file") or {})
    from_shards = sum(by_file.pop(name, 0) for name in shard_names)
    stats = {
        **data_stats,
        "distilled_reused": int(data_stats.get("distilled_reused") or 0) - from_shards,
        "distilled_reused_by_file": by_file,
    }
    return part, stats


def _reuse_finished_training(ctx: JobContext, sync: RunDirectorySync) -> None:
    layout = ctx.layout
    ctx.report("Training finished in an earlier run of this job; reusing its staged head", fraction=0.5)
    sync.restore()
    run_dir = sync.run_dir
    for name in HEAD_FILES:
        ctx.s3.download(layout.staged(HEAD_DIR + name), run_dir / HEAD_DIRNAME / name)
    for name in OPTIONAL_HEAD_FILES:
        if ctx.s3.head(layout.staged(HEAD_DIR + name)) is not None:
            ctx.s3.download(layout.staged(HEAD_DIR + name), run_dir / HEAD_DIRNAME / name)
    ctx.s3.download(layout.staged(TRAINING_METRICS), run_dir / METRICS_FILE)
    _set_output(ctx, run_dir, ctx.s3.read_json(layout.staged(TRAIN_RESULT)))
    ctx.report("Reusing the head trained by an earlier run", fraction=1.0)


def _set_output(ctx: JobContext, run_dir: Path, result: dict[str, Any]) -> None:
    ctx.artifacts.train = TrainOutput(
        result=result,
        run_dir=run_dir,
        head_dir=run_dir / HEAD_DIRNAME,
        metrics_path=run_dir / METRICS_FILE,
        heldout_path=run_dir / HELDOUT_FILE,
    )


def _with_uris(ctx: JobContext, message: str) -> str:
    """Name the job's inputs by their S3 URIs instead of their paths in the local cache."""
    replacements: dict[str, str] = {}
    if ctx.artifacts.data is not None:
        data = ctx.artifacts.data
        replacements.update({str(data.local_dir / e.path): e.object.uri for e in data.snapshot.entries})
    if ctx.artifacts.model is not None and ctx.artifacts.model.local_dir is not None:
        replacements[str(ctx.artifacts.model.local_dir)] = ctx.artifacts.model.location.uri.rstrip("/")
    if ctx.artifacts.base_head is not None:
        replacements[str(ctx.artifacts.base_head.local_dir)] = ctx.artifacts.base_head.location.uri.rstrip(
            "/"
        )
    for local, uri in sorted(replacements.items(), key=lambda item: -len(item[0])):
        message = message.replace(local, uri)
    return message
