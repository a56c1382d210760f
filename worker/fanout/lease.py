"""A worker's hold on one shard: its heartbeat object, written by S3 conditional writes.

Claiming writes the heartbeat only over the version the claimant read (or only where none
is yet), and every later beat only over the version its holder wrote last. S3 does each
conditional write atomically, so of two workers that claim one shard at once exactly one
holds it, however slow either is, and a holder whose stale lease another worker took over
learns so at its next beat and stops. (A read-back after a pause could not promise this: a
claim written after the other claimant's read-back went unnoticed, and both distilled.)
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from types import TracebackType

from pydantic import ValidationError

from core.job_errors import JobFailedError
from core.s3 import S3Location
from core.s3_store import S3Store
from worker.fanout.layout import ShardHeartbeat
from worker.worker_identity import WorkerIdentity

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeartbeatSeen:
    """The shard's heartbeat as read, with the ETag of that version (None: no heartbeat yet)."""

    beat: ShardHeartbeat | None
    etag: str | None


def read_heartbeat_seen(s3: S3Store, location: S3Location) -> HeartbeatSeen:
    found = s3.read_versioned(location)
    if found is None:
        return HeartbeatSeen(None, None)
    body, etag = found
    try:
        return HeartbeatSeen(ShardHeartbeat.model_validate_json(body), etag)
    except ValidationError as error:
        raise JobFailedError(f"{location.uri} is not a shard heartbeat: {error}") from error


def read_heartbeat(s3: S3Store, location: S3Location) -> ShardHeartbeat | None:
    """The shard's heartbeat (one GET), or None before any worker claimed it."""
    return read_heartbeat_seen(s3, location).beat


class ShardLease:
    """This worker's heartbeat on a shard, rewritten every ``interval`` seconds from a thread.

    ``lost`` turns true once another worker's write replaced ours: the holder then stops
    distilling and hands nothing in."""

    def __init__(
        self,
        s3: S3Store,
        location: S3Location,
        me: WorkerIdentity,
        *,
        task_id: str,
        total: int,
        etag: str,
        interval: float,
    ) -> None:
        self.s3, self.location, self.me, self.task_id, self.total = s3, location, me, task_id, total
        self.etag, self.interval = etag, interval
        self.done = 0
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{location.key}-beats", daemon=True)

    def set_done(self, done: int) -> None:
        self.done = done

    def beat(self) -> bool:
        """Rewrite the heartbeat over our last version; False (and ``lost``) once another's replaced it."""
        if self.lost.is_set():
            return False
        body = _heartbeat_body(self.me, self.task_id, self.done, self.total)
        etag = self.s3.put_bytes_if(body, self.location, replacing=self.etag)
        if etag is None:
            etag = self._still_ours(body)
        if etag is None:
            self.lost.set()
            logger.warning("%s: another worker took this shard over; stopping", self.location.uri)
            return False
        self.etag = etag
        return True

    def _still_ours(self, body: bytes) -> str | None:
        """After a refused write of ``body``: a write of ours whose answer never arrived still
        counts, and ``body`` goes over it."""
        seen = read_heartbeat_seen(self.s3, self.location)
        ours = seen.beat is not None and (seen.beat.task_id, seen.beat.worker) == (self.task_id, self.me)
        if not ours or seen.etag is None:
            return None
        return self.s3.put_bytes_if(body, self.location, replacing=seen.etag)

    def _run(self) -> None:
        while not self._stop.wait(self.interval) and not self.lost.is_set():
            try:
                self.beat()
            except Exception:  # a missed beat is retried; the lease tolerates a few
                logger.warning("%s: heartbeat failed", self.location.uri, exc_info=True)

    def __enter__(self) -> ShardLease:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()


def claim_shard(
    s3: S3Store,
    location: S3Location,
    me: WorkerIdentity,
    *,
    task_id: str,
    total: int,
    lease_seconds: float,
    seen: HeartbeatSeen | None = None,
) -> ShardLease | None:
    """Take the shard unless a live worker holds it (a heartbeat younger than the lease) or
    another worker's claim lands first; ``seen`` is the heartbeat as read before (default: read now)."""
    seen = seen if seen is not None else read_heartbeat_seen(s3, location)
    held = seen.beat
    if held is not None and held.task_id != task_id and time.time() - held.at_epoch < lease_seconds:
        return None
    etag = s3.put_bytes_if(_heartbeat_body(me, task_id, 0, total), location, replacing=seen.etag)
    if etag is None:
        return None
    return ShardLease(s3, location, me, task_id=task_id, total=total, etag=etag, interval=lease_seconds / 4)


def _heartbeat_body(me: WorkerIdentity, task_id: str, done: int, total: int) -> bytes:
    beat = ShardHeartbeat(worker=me, task_id=task_id, done=done, total=total, at_epoch=time.time())
    return (beat.model_dump_json(indent=2) + "\n").encode()
