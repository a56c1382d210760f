"""One shard of a job's fanned-out distillation, run by whichever worker takes it.

A worker of the job's queue (or the job's own worker, while it waits) claims the shard by
writing its heartbeat, fetches the model into its local cache, distils the shard's
conversations and writes the records, then ``result.json``. It ends early, writing nothing,
when the job stops running (StopOptimizationJob, a failure); at the plan's deadline it writes
what it finished, marked ``stopped``. A shard already in, or held by a live worker, is left alone.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import torch

from core.job_spec import JobSpec
from core.output_layout import OutputLayout
from core.s3 import S3Location, s3_client
from core.s3_store import S3Object, S3Store
from db.settings import Settings, get_settings
from trainer.data.schema import Conversation, Message
from trainer.distil import distil_shard
from trainer.eagle.distillation import chunk_size
from worker.artifact_cache import ArtifactCache, cache_root
from worker.fanout.layout import (
    PLAN,
    DistillationPlanDocument,
    ShardLayout,
    ShardResult,
    shard_train_config,
)
from worker.fanout.lease import claim_shard
from worker.job_store import JobStore
from worker.s3_snapshot import S3Snapshot, SnapshotEntry
from worker.worker_identity import current_worker

logger = logging.getLogger(__name__)

# The plan keeps each model object's path, key, ETag and size; its date decides nothing.
_EPOCH = datetime.fromtimestamp(0, tz=UTC)
# The job's status is read from the database at most this often while distilling.
STATUS_POLL_SECONDS = 1.0


def job_store_s3(store: JobStore, settings: Settings, job: JobSpec) -> S3Store:
    """S3 as the job's role, as every stage of the job uses it."""
    role = store.role_credentials(job)
    credentials = (role.access_key_id, role.secret_access_key)
    return S3Store(s3_client(settings, region=job.region, credentials=credentials))


def run_distillation_shard(
    job_id: int,
    index: int,
    *,
    task_id: str | None,
    settings: Settings | None = None,
    store: JobStore | None = None,
    s3: S3Store | None = None,
    also_stop: Callable[[], bool] | None = None,
) -> str:
    """Distil shard ``index`` of the job; returns what happened (for the task's log line)."""
    settings = settings or get_settings()
    store = store or JobStore()
    job = store.running_job(job_id)
    if job is None:
        return "job not running"
    s3 = s3 or job_store_s3(store, settings, job)
    layout = OutputLayout.for_job(job)
    shard = ShardLayout(layout, index)
    if s3.head(shard.result) is not None:
        return "already in"
    plan = DistillationPlanDocument.model_validate(s3.read_json(layout.staged(PLAN)))
    spec = plan.shards[index]
    me = current_worker(settings.device)
    task_id = task_id or f"inline-{uuid.uuid4().hex[:12]}"
    lease = settings.distillation_shard_lease_seconds
    claimed = claim_shard(
        s3, shard.heartbeat, me, task_id=task_id, total=spec.conversations, lease_seconds=lease
    )
    if claimed is None:
        return "held by another worker"
    stop = _StopCheck(store, job_id, plan.deadline_epoch, also_stop, lost=claimed.lost)
    with claimed as beat:
        model_dir = _fetch_model(s3, settings, plan)
        scratch = cache_root(settings) / "jobs" / f"job-{job_id}" / "shards" / f"{index}-{task_id}"
        config = shard_train_config(plan, model_dir, scratch, device=settings.device)
        outcome = distil_shard(
            config,
            read_conversations(s3, shard.input),
            first_chunk=spec.first_chunk,
            # Plans from before chunks were sized by device chunked by the CPU's rows.
            chunk_size=plan.chunk_size or chunk_size(config, torch.device("cpu")),
            origins=plan.origins,
            progress=beat.set_done,
            should_stop=stop,
        )
    if stop.job_ended:
        return "job stopped"
    # A worker that stalled past its lease may have been replaced: only the holder hands in.
    if not claimed.beat():
        return "taken over by another worker"
    body = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in outcome.records)
    s3.put_bytes(body.encode(), shard.records, content_type="application/x-ndjson")
    result = ShardResult(
        index=index,
        worker=me,
        records=len(outcome.records),
        generated_tokens=outcome.generated_tokens,
        seconds=outcome.seconds,
        stopped=outcome.stopped,
        attempt_task_id=task_id,
    )
    s3.put_json(result.model_dump(mode="json"), shard.result)
    logger.info(
        "job %s shard %s: %s records, %s tokens in %.1f s", job_id, index, result.records,
        result.generated_tokens, result.seconds,
    )  # fmt: skip
    return f"{result.records} records"


def write_conversations(s3: S3Store, location: S3Location, conversations: list[Conversation]) -> None:
    rows = [{"source": c.source, "messages": c.as_dicts()} for c in conversations]
    body = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    s3.put_bytes(body.encode(), location, content_type="application/x-ndjson")


def read_conversations(s3: S3Store, location: S3Location) -> list[Conversation]:
    conversations = []
    for line in s3.read_bytes(location).decode().splitlines():
        if line.strip():
            row = json.loads(line)
            messages = [Message(role=m["role"], content=m["content"]) for m in row["messages"]]
            conversations.append(Conversation(messages=messages, source=row["source"]))
    return conversations


def _fetch_model(s3: S3Store, settings: Settings, plan: DistillationPlanDocument) -> Path:
    """The plan's model in this worker's cache (downloaded once per worker, keyed by ETags)."""
    entries = tuple(
        SnapshotEntry(
            obj.path,
            S3Object(S3Location.parse(obj.uri, field="model"), obj.etag, obj.size, _EPOCH),
        )
        for obj in plan.model_objects
    )
    snapshot = S3Snapshot(source=plan.model_uri, entries=entries)
    cache = ArtifactCache(cache_root(settings))
    if plan.model_compressed:
        return cache.fetch_archive(
            s3, snapshot, kind="models", max_unpacked_bytes=settings.max_model_archive_bytes
        )
    return cache.fetch(s3, snapshot, kind="models")


class _StopCheck:
    """Stop distilling when the job is no longer running, at the plan's deadline, or once
    another worker has taken the shard over (``lost``)."""

    def __init__(
        self,
        store: JobStore,
        job_id: int,
        deadline_epoch: float | None,
        also_stop: Callable[[], bool] | None,
        *,
        lost: threading.Event,
    ) -> None:
        self.store, self.job_id, self.deadline, self.also_stop = store, job_id, deadline_epoch, also_stop
        self.lost = lost
        self.job_ended = False
        self._checked = 0.0

    def __call__(self) -> bool:
        if self.also_stop is not None and self.also_stop():
            self.job_ended = True
        now = time.monotonic()
        if not self.job_ended and now - self._checked >= STATUS_POLL_SECONDS:
            self._checked = now
            self.job_ended = self.store.running_job(self.job_id) is None
        past_deadline = self.deadline is not None and time.time() >= self.deadline
        return self.job_ended or self.lost.is_set() or past_deadline
