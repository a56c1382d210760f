"""Stage 'base': the job's Base EAGLE head, from the base-head store or built now.

- A job whose model has an ``eagle_model`` head already has its base (stage 'validate').
- Without EAGLENEST_BASE_HEADS_URI there are no base heads: no Base EAGLE row.
- When the store holds the model's base head (worker.base_heads), it is fetched through the
  local cache and checked against the sha256 its manifest committed.
- Otherwise, when eaglenest ships a head trained for exactly this model (worker.shipped_heads),
  it is checked against its manifest's sha256 and committed to the store; a mismatching one is
  refused (the job says why) and never used.
- Otherwise this job builds it first: the built-in recipe (worker.base_head_recipe) on the
  built-in datasets, its checkpoints mirrored under the job's staging prefix so a redelivered
  job resumes, then committed to the store for every later job on the model. When
  MaxRuntimeInSeconds leaves too little time, the job goes on without one and says so.

Jobs that bring their own data start training from the base head (stage 'train'); every job
benchmarks it as Base EAGLE and names it in lineage.json (URI and sha256).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from core.job_errors import JobFailedError
from core.output_layout import BASE_TRAIN_RUN
from core.s3 import S3Location, s3_client
from core.s3_store import S3Store
from engine.heads.head_format import InvalidHeadError, draft_variant
from engine.heads.validate import validate_head
from trainer.eagle.reporting import TrainProgress, describe_progress
from trainer.train import HEAD_DIRNAME, train
from worker.artifacts import HeadInput, TrainingDataInput, required
from worker.base_head_recipe import base_head_budget_seconds, base_head_config, name_the_verifier
from worker.base_heads import BaseHead, BaseHeadStore, base_head_key, base_head_manifest
from worker.builtin_catalog import builtin_snapshot
from worker.context import JobContext
from worker.run_sync import RunDirectorySync
from worker.shipped_heads import ShippedHeadRefusedError, shipped_head_for
from worker.stages.data import fetch_training_data
from worker.target_config import target_config_from_dict

BASE_RUN_DIRNAME = "base-train"
PROGRESS_INTERVAL_SECONDS = 2.0

logger = logging.getLogger(__name__)


def provide_base_head(ctx: JobContext) -> None:
    if ctx.artifacts.base_head is not None:
        ctx.report("The model's eagle_model head is this job's base head", fraction=1.0)
        return
    uri = ctx.settings.base_heads_uri
    if uri is None:
        ctx.report("No base heads (EAGLENEST_BASE_HEADS_URI is not set): no Base EAGLE row", fraction=1.0)
        return
    model = required(ctx.artifacts.model, "the base model")
    # The service's own identity, not the job's role: the store is shared by every account.
    store = BaseHeadStore(
        S3Store(s3_client(ctx.settings, region=ctx.job.region)),
        S3Location.parse(uri, field="EAGLENEST_BASE_HEADS_URI"),
    )
    key = base_head_key(model.snapshot)
    head, how = store.find(key), "reused"
    if head is None:
        head, how = _install_shipped(ctx, store, key), "shipped with eaglenest"
    if head is None:
        head, how = _build(ctx, store, key), "built by this job"
        if head is None:
            return
    ctx.artifacts.base_head = _fetch(ctx, store, head, built=how == "built by this job")
    ctx.report(f"Base head {head.location.uri} ({how})", fraction=1.0)


def _install_shipped(ctx: JobContext, store: BaseHeadStore, key: str) -> BaseHead | None:
    """The head shipped for exactly this model (worker.shipped_heads), committed to the store as
    the model's base head; None when none is shipped for it, or when the one shipped is refused."""
    model = required(ctx.artifacts.model, "the base model")
    try:
        shipped = shipped_head_for(required(model.local_dir, "the cached base model"))
    except ShippedHeadRefusedError as error:
        logger.warning("%s", error)
        message = f"{error}. Not used: this job builds the model's base head itself"
        ctx.store.record_event(ctx.job.id, stage=ctx.stage, message=f"Warning: {message}")
        ctx.report(message, fraction=0.0)
        return None
    if shipped is None:
        return None
    message = (
        f"Base head: the head shipped for this model ({shipped.name}, model.safetensors sha256 "
        f"{shipped.sha256['model.safetensors'][:12]}, manifest sha256 {shipped.manifest_sha256[:12]}) "
        "matches its manifest; committed to the base-head store"
    )
    manifest = {
        "model_uri": model.location.uri,
        "model": model.snapshot.to_lineage(),
        "architecture": model.architecture,
        "built_by": f"eaglenest (shipped head {shipped.name})",
        "builtin_datasets": [entry["name"] for entry in shipped.manifest.get("data", {}).get("datasets", [])],
        "hyperparameters": shipped.manifest.get("recipe", {}),
        "shipped_head": shipped.lineage(),
    }
    build = f"shipped-{shipped.name}-{shipped.manifest_sha256[:16]}"
    head = store.publish(key, shipped.directory, build=build, manifest=manifest)
    ctx.store.record_event(ctx.job.id, stage=ctx.stage, message=message)
    ctx.report(message, fraction=0.5)
    return head


def _fetch(ctx: JobContext, store: BaseHeadStore, head: BaseHead, *, built: bool) -> HeadInput:
    snapshot = store.snapshot(head)
    local_dir = ctx.cache.fetch(store.store, snapshot, kind="heads")
    store.verify(head, local_dir)
    model = required(ctx.artifacts.model, "the base model")
    try:
        report = validate_head(local_dir, target_config_from_dict(model.config))
    except InvalidHeadError as error:
        raise JobFailedError(
            f"The base head {head.location.uri} does not fit the model: "
            f"{str(error).replace(str(local_dir), head.location.uri.rstrip('/'))}"
        ) from error
    summary = {
        "num_parameters": report.num_parameters,
        "draft_vocab_size": report.draft_vocab_size,
        "draft_variant": draft_variant(report.config),
        "aux_layer_ids": report.aux_layer_ids,
        "warnings": report.warnings,
    }
    return HeadInput(
        location=head.location,
        snapshot=snapshot,
        local_dir=local_dir,
        summary=summary,
        origin="base_heads",
        sha256=head.sha256,
        store_key=head.key,
        built_by_this_job=built,
        shipped=head.manifest.get("shipped_head"),
    )


def _build(ctx: JobContext, store: BaseHeadStore, key: str) -> BaseHead | None:
    """Train the model's base head and commit it; None when the job has no time for it."""
    model = required(ctx.artifacts.model, "the base model")
    run_dir = ctx.work_dir / BASE_RUN_DIRNAME
    sync = RunDirectorySync(ctx.s3, ctx.layout.staged(BASE_TRAIN_RUN), run_dir)
    state = sync.restore()
    trained = float(state.get("train_seconds") or 0.0) if state else 0.0
    budget = base_head_budget_seconds(ctx.settings, seconds_left=ctx.seconds_left(), trained_seconds=trained)
    if budget <= 0:
        ctx.report(
            f"No base head for {model.location.uri} yet, and MaxRuntimeInSeconds leaves no time to "
            "build one: no Base EAGLE row",
            fraction=1.0,
        )
        return None
    data = _builtin_data(ctx)
    config = base_head_config(
        ctx.settings,
        model_dir=required(model.local_dir, "the cached base model"),
        data_files=[] if data is None else data.files,
        run_dir=run_dir,
        budget_minutes=budget / 60.0,
    )
    ctx.report(
        f"No base head for {model.location.uri} yet: training one on the built-in data "
        f"({budget / 60:.1f} minutes), for this job and every later job on the model",
        fraction=0.0,
    )
    progress = _Progress(ctx, budget, on_step=sync.sync)
    try:
        result = train(config, progress, ctx.should_stop)
    except ValueError as error:
        # The base head is the job's comparison row, not its product: built-in data the recipe
        # cannot train on (no usable samples) must not fail a job that brought its own data.
        logger.warning("base head for %s not built: %s", model.location.uri, error)
        ctx.report(f"Base head not built ({error}): no Base EAGLE row", fraction=1.0)
        return None
    sync.sync()
    if result.training.stopped:
        ctx.check()
        raise RuntimeError("the base head's training stopped without a stop request or deadline")
    head_dir = run_dir / HEAD_DIRNAME
    name_the_verifier(head_dir, model.location.uri)
    manifest = base_head_manifest(
        model_uri=model.location.uri,
        model=model.snapshot,
        architecture=model.architecture,
        data=data,
        result=result,
        built_by=ctx.job.arn,
    )
    # Named after the job (a redelivered job rewrites its own build, never another's).
    job_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{ctx.job.arn}@{ctx.job.created_at.isoformat()}")
    build = f"{ctx.job.name}-{job_id}"
    return store.publish(key, head_dir, build=build, manifest=manifest)


def _builtin_data(ctx: JobContext) -> TrainingDataInput | None:
    """The built-in datasets: the job's own data when it trains on them; None when no catalog
    is published (the recipe's self-instruct prompts are then all the base head learns from)."""
    data = required(ctx.artifacts.data, "the training data")
    if data.kind == "BuiltIn":
        return data
    try:
        snapshot, listing, datasets = builtin_snapshot(ctx.s3, ctx.settings)
    except JobFailedError as error:
        ctx.report(f"Base head: no built-in datasets ({error}); self-instruct prompts only", fraction=0.0)
        return None
    return fetch_training_data(
        ctx.s3,
        ctx.cache,
        snapshot,
        kind="BuiltIn",
        listing=listing,
        datasets=datasets,
        max_skip_fraction=ctx.settings.max_skipped_record_fraction,
    )


class _Progress:
    """The base head's training as the stage's progress (its steps are not the job's head's,
    so they stay out of the training chart)."""

    def __init__(self, ctx: JobContext, budget_seconds: float, *, on_step: Callable[[], object]) -> None:
        self.ctx = ctx
        self.budget_seconds = budget_seconds
        self.on_step = on_step
        self._last = 0.0

    def __call__(self, progress: TrainProgress) -> None:
        self.on_step()
        now = time.monotonic()
        if now - self._last < PROGRESS_INTERVAL_SECONDS and progress.stage != "done":
            return
        self._last = now
        fraction = min(0.99, progress.elapsed_seconds / self.budget_seconds) if self.budget_seconds else None
        self.ctx.report(f"Base head: {describe_progress(progress)}", fraction=fraction)
