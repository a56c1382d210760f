"""The job's side of a fanned-out distillation: queue the shards, help, watch, retry, merge.

The job's worker queues one Celery task per shard on the job's queue, then distils shards
itself too (one at a time, in a thread, from the end of the plan) rather than idle while it
waits. It watches each shard's heartbeat: one whose heartbeat has not changed for the lease
(its worker died, or lost the network) is queued again and may be taken by any worker,
this one included. A stop or a failure of the job revokes every shard task; the shards still
running see the job end and stop. At the plan's deadline the shards stop where they are;
those no worker had started are left out, as a single worker's distillation would leave them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from core.s3_store import S3Store
from worker.context import JobContext
from worker.fanout.layout import DistillationPlanDocument, MergedDistillation, ShardLayout, ShardResult
from worker.fanout.lease import read_heartbeat
from worker.fanout.shard import run_distillation_shard

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
REPORT_SECONDS = 2.0

SendShard = Callable[[int], str]
RevokeTasks = Callable[[list[str]], None]


@dataclass
class _Watch:
    """What the coordinator last saw of a shard's heartbeat, by its own clock (no clock skew)."""

    etag: str | None = None
    changed_at: float = field(default_factory=time.monotonic)


class ShardCoordinator:
    def __init__(
        self,
        ctx: JobContext,
        plan: DistillationPlanDocument,
        *,
        send: SendShard,
        revoke: RevokeTasks,
        help_inline: bool = True,
    ) -> None:
        self.ctx, self.plan, self.send, self.revoke = ctx, plan, send, revoke
        self.help_inline = help_inline
        self.s3: S3Store = ctx.s3
        self.lease = ctx.settings.distillation_shard_lease_seconds
        self.layouts = [ShardLayout(ctx.layout, spec.index) for spec in plan.shards]
        self.results: dict[int, ShardResult] = {}
        self.tasks: dict[int, str] = {}
        self.watches: dict[int, _Watch] = {}
        self.retried: list[int] = []
        self._last_report = 0.0

    def run(self) -> MergedDistillation:
        started = time.monotonic()
        self._collect()
        for spec in self.plan.shards:
            if spec.index not in self.results:
                self.tasks[spec.index] = self.send(spec.index)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="inline-shard") as helper:
            inline: Future[str] | None = None
            try:
                while True:
                    self.ctx.check()
                    if inline is not None and inline.done():
                        inline.result()  # an error of the inline shard is the job's
                        inline = None
                    self._collect()
                    pending = [s.index for s in self.plan.shards if s.index not in self.results]
                    if not pending or self._given_up(pending):
                        break
                    free = self._free(pending)
                    self._report(pending)
                    if self.help_inline and inline is None and free and not self._past_deadline():
                        inline = helper.submit(self._run_inline, free[-1])
                        continue
                    time.sleep(POLL_SECONDS)
            except BaseException:
                self.revoke(list(self.tasks.values()))
                raise
        # Queued copies of shards this worker did itself would only find them done.
        self.revoke(list(self.tasks.values()))
        return self._merged(started)

    def _run_inline(self, index: int) -> str:
        return run_distillation_shard(
            self.ctx.job.id,
            index,
            task_id=None,
            settings=self.ctx.settings,
            store=self.ctx.store,
            s3=self.s3,
            also_stop=self.ctx.should_stop,
        )

    def _collect(self) -> None:
        for layout in self.layouts:
            if layout.index in self.results or self.s3.head(layout.result) is None:
                continue
            result = ShardResult.model_validate(self.s3.read_json(layout.result))
            self.results[layout.index] = result
            worker = result.worker
            self.ctx.store.record_event(
                self.ctx.job.id,
                stage=self.ctx.stage,
                message=f"Shard {layout.index}: {result.records} records, {result.generated_tokens} tokens "
                f"in {result.seconds:.0f} s on {worker.hostname} (pid {worker.pid}, {worker.device})",
                worker=worker.model_dump(),
            )

    def _free(self, pending: list[int]) -> list[int]:
        """Pending shards no live worker holds: never claimed, or their heartbeat went stale.

        A stale one is queued again (any worker of the queue may take it)."""
        free = []
        now = time.monotonic()
        for index in pending:
            found = self.s3.head(self.layouts[index].heartbeat)
            if found is None:
                free.append(index)
                continue
            watch = self.watches.setdefault(index, _Watch())
            if found.etag != watch.etag:
                watch.etag, watch.changed_at = found.etag, now
                continue
            if now - watch.changed_at >= self.lease:
                free.append(index)
                self._queue_again(index)
                watch.changed_at = now  # give the new attempt a lease of its own
        return free

    def _queue_again(self, index: int) -> None:
        beat = read_heartbeat(self.s3, self.layouts[index].heartbeat)
        holder = "its worker" if beat is None else f"{beat.worker.hostname} (pid {beat.worker.pid})"
        message = f"Shard {index}: no heartbeat from {holder} for {self.lease:.0f} s; queued again"
        logger.warning("optimization job %s: %s", self.ctx.job.id, message)
        self.ctx.store.record_event(self.ctx.job.id, stage=self.ctx.stage, message=message)
        self.revoke([self.tasks[index]] if index in self.tasks else [])
        self.tasks[index] = self.send(index)
        self.retried.append(index)

    def _past_deadline(self) -> bool:
        return self.plan.deadline_epoch is not None and time.time() >= self.plan.deadline_epoch

    def _given_up(self, pending: list[int]) -> bool:
        """Past the deadline, only shards a live worker still holds are worth waiting for
        (they stop at the deadline too and hand in what they finished)."""
        if not self._past_deadline():
            return False
        now = time.monotonic()
        held = [i for i in pending if i in self.watches and now - self.watches[i].changed_at < self.lease]
        for index in pending:
            if index not in self.watches and self.s3.head(self.layouts[index].heartbeat) is not None:
                self.watches[index] = _Watch()
                held.append(index)
        return not held

    def _report(self, pending: list[int]) -> None:
        now = time.monotonic()
        if now - self._last_report < REPORT_SECONDS:
            return
        self._last_report = now
        total = sum(s.conversations for s in self.plan.shards) or 1
        done = sum(s.conversations for s in self.plan.shards if s.index in self.results)
        running = []
        for index in pending:
            beat = read_heartbeat(self.s3, self.layouts[index].heartbeat)
            if beat is not None:
                done += min(beat.done, beat.total)
                running.append(f"{beat.worker.hostname}:{beat.worker.pid}")
        self.ctx.report(
            f"Distilling in {len(self.plan.shards)} shards: {len(self.results)} in, {len(running)} running"
            f"{' on ' + ', '.join(sorted(set(running))) if running else ''}, "
            f"{len(pending) - len(running)} queued; {done} of {total} conversations",
            fraction=min(1.0, done / total),
        )

    def _merged(self, started: float) -> MergedDistillation:
        shards = [self.results[s.index] for s in self.plan.shards if s.index in self.results]
        return MergedDistillation(
            shards=shards,
            missing_shards=[s.index for s in self.plan.shards if s.index not in self.results],
            records=sum(r.records for r in shards),
            generated_tokens=sum(r.generated_tokens for r in shards),
            seconds=time.monotonic() - started,
            retried_shards=self.retried,
            coordinator=self.plan.coordinator,
        )
