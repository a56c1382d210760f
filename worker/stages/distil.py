"""Stage 'distil': a job's distillation fanned out over every worker of its queue.

With ``distillation_shard_conversations`` set, the conversations the trainer would distil
(``trainer.distil.plan_distillation``: the data's, less what the distillation cache already
holds, with self-instruct prompts mixed in) are cut into shards of whole chunks and queued
as Celery tasks (worker.fanout). Training starts once every shard is in, on their records
(``distilled_elsewhere``), which under greedy decoding are those one worker would write.
Without the setting, or for a job that does not distil, the stage does nothing and the
trainer distils as before. A redelivered job finds its plan, shards and merge on S3.
"""

from __future__ import annotations

import math
import time
from functools import partial

from core import job_queue
from core.output_layout import TRAIN_RESULT
from trainer.config import TrainConfig
from trainer.distil import plan_distillation
from worker.artifacts import FannedOutDistillation, required
from worker.context import JobContext
from worker.fanout.coordinator import ShardCoordinator
from worker.fanout.layout import (
    MERGED,
    PLAN,
    DistillationPlanDocument,
    MergedDistillation,
    ModelObject,
    ShardLayout,
    ShardSpec,
    plan_train_config,
    shard_name,
)
from worker.fanout.shard import write_conversations
from worker.stages.train import DISTILLED_DIRNAME, job_train_config, open_distillation_cache
from worker.train_plan import training_budget_minutes
from worker.worker_identity import current_worker

SHARDS_DIRNAME = "distilled-shards"


def distil_across_workers(ctx: JobContext) -> None:
    shard_size = ctx.settings.distillation_shard_conversations
    if shard_size == 0:
        ctx.report("Not fanned out (distillation_shard_conversations is 0): training distils", fraction=1.0)
        return
    if ctx.s3.head(ctx.layout.staged(TRAIN_RESULT)) is not None:
        ctx.report("Training finished in an earlier run of this job; nothing to distil", fraction=1.0)
        return
    config = job_train_config(ctx, ctx.work_dir / "distil", budget_minutes=None)
    if not config.regenerate:
        ctx.report("The job does not distil (EAGLE_REGENERATE is off)", fraction=1.0)
        return
    merged_location = ctx.layout.staged(MERGED)
    if ctx.s3.head(merged_location) is None:
        plan = _plan(ctx, config, shard_size)
        coordinator = ShardCoordinator(
            ctx,
            plan,
            send=partial(_send_shard, ctx),
            revoke=job_queue.revoke_tasks,
        )
        merged = coordinator.run()
        ctx.s3.put_json(merged.model_dump(mode="json"), merged_location)
    else:
        merged = MergedDistillation.model_validate(ctx.s3.read_json(merged_location))
    directory = ctx.work_dir / SHARDS_DIRNAME
    files = []
    for result in merged.shards:
        path = directory / f"{shard_name(result.index)}.jsonl"
        ctx.s3.download(ShardLayout(ctx.layout, result.index).records, path)
        files.append(path)
    ctx.artifacts.distilled = FannedOutDistillation(files, merged.model_dump(mode="json"))
    workers = {f"{r.worker.hostname}:{r.worker.pid}" for r in merged.shards}
    ctx.report(
        f"{merged.records} records ({merged.generated_tokens} tokens) from {len(merged.shards)} shards "
        f"on {len(workers)} workers in {merged.seconds:.0f} s"
        + (
            f"; {len(merged.missing_shards)} shards left undone at the deadline"
            if merged.missing_shards
            else ""
        ),
        fraction=1.0,
    )


def _send_shard(ctx: JobContext, index: int) -> str:
    return job_queue.enqueue_distillation_shard(
        ctx.job.id, index, queue=job_queue.queue_for_job(ctx.settings, ctx.job.deployment_instance_type)
    )


def _plan(ctx: JobContext, config: TrainConfig, shard_size: int) -> DistillationPlanDocument:
    """The plan an earlier run of this job wrote, or a new one (its shards' inputs first)."""
    location = ctx.layout.staged(PLAN)
    if ctx.s3.head(location) is not None:
        ctx.report("Resuming the distillation planned by an earlier run of this job", fraction=0.0)
        return DistillationPlanDocument.model_validate(ctx.s3.read_json(location))
    cache = open_distillation_cache(ctx, config)
    if cache is not None:
        config = config.model_copy(
            update={"distilled_paths": cache.download(ctx.work_dir / DISTILLED_DIRNAME)}
        )
    budget = training_budget_minutes(ctx.knobs, seconds_left=ctx.seconds_left(), trained_seconds=0.0)
    deadline = None if budget is None else time.time() + budget * 60.0 * config.regenerate_budget_fraction
    ctx.report("Choosing the conversations to distil", fraction=0.0)
    planned = plan_distillation(
        config,
        should_stop=ctx.should_stop,
        progress=lambda _stage, done, total: ctx.report(f"Writing self-instruct prompts: {done} of {total}"),
    )
    ctx.check()
    per_shard = max(1, math.ceil(shard_size / planned.chunk_size)) * planned.chunk_size
    shards = []
    for index, start in enumerate(range(0, len(planned.conversations), per_shard)):
        part = planned.conversations[start : start + per_shard]
        write_conversations(ctx.s3, ShardLayout(ctx.layout, index).input, part)
        shards.append(
            ShardSpec(index=index, first_chunk=start // planned.chunk_size, conversations=len(part))
        )
    model = required(ctx.artifacts.model, "the base model")
    plan = DistillationPlanDocument(
        train_config=plan_train_config(config),
        model_uri=model.location.uri,
        model_objects=[
            ModelObject(path=e.path, uri=e.object.uri, etag=e.object.etag, size=e.object.size)
            for e in model.snapshot.entries
        ],
        model_compressed=model.compressed,
        origins=planned.origins,
        shards=shards,
        deadline_epoch=deadline,
        self_instruct=planned.self_instruct,
        chunk_size=planned.chunk_size,
        coordinator=current_worker(ctx.settings.device),
    )
    ctx.s3.put_json(plan.model_dump(mode="json"), location)
    return plan
