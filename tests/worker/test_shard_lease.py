"""A shard's lease on real S3 (SeaweedFS): conditional writes decide who holds a shard.

Interleavings are replayed step by step (what a worker read, then another's write, then its
own), so each race is exercised every run rather than when the machine happens to be slow.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from core.job_errors import JobFailedError
from core.s3 import S3Location
from core.s3_store import S3Store
from worker.fanout.lease import ShardLease, claim_shard, read_heartbeat, read_heartbeat_seen
from worker.worker_identity import WorkerIdentity

FIRST = WorkerIdentity(hostname="host-a", pid=101, device="cpu")
SECOND = WorkerIdentity(hostname="host-b", pid=202, device="cpu")


@pytest.fixture
def heartbeat(s3_client: Any, s3_bucket: str) -> tuple[S3Store, S3Location]:
    return S3Store(s3_client), S3Location(s3_bucket, "job/distillation/shards/shard-00002/heartbeat.json")


def _claim(
    where: tuple[S3Store, S3Location], me: WorkerIdentity, task_id: str, *, lease: float = 60.0, **seen: Any
) -> ShardLease | None:
    s3, location = where
    return claim_shard(s3, location, me, task_id=task_id, total=16, lease_seconds=lease, **seen)


def test_of_two_workers_that_read_a_free_shard_at_once_only_the_first_writer_holds_it(
    heartbeat: tuple[S3Store, S3Location],
) -> None:
    s3, location = heartbeat
    both_saw = read_heartbeat_seen(s3, location)
    assert both_saw.beat is None

    first = _claim(heartbeat, FIRST, "task-a", seen=both_saw)
    # However late the second worker's write comes, it is refused: it claimed what it read.
    second = _claim(heartbeat, SECOND, "task-b", seen=both_saw)

    assert first is not None
    assert second is None
    held = read_heartbeat_seen(s3, location).beat
    assert held is not None
    assert (held.task_id, held.worker) == ("task-a", FIRST)


def test_a_live_holder_keeps_its_shard_and_its_beats_carry_progress(
    heartbeat: tuple[S3Store, S3Location],
) -> None:
    s3, location = heartbeat
    first = _claim(heartbeat, FIRST, "task-a")
    assert first is not None
    assert _claim(heartbeat, SECOND, "task-b") is None  # fresh heartbeat: held

    first.set_done(5)
    assert first.beat()
    assert first.beat()
    held = read_heartbeat_seen(s3, location).beat
    assert held is not None
    assert (held.task_id, held.done, held.total) == ("task-a", 5, 16)
    assert not first.lost.is_set()


def test_a_stale_lease_is_taken_over_and_the_old_holder_learns_it_at_its_next_beat(
    heartbeat: tuple[S3Store, S3Location],
) -> None:
    s3, location = heartbeat
    stalled = _claim(heartbeat, FIRST, "task-a")
    assert stalled is not None
    # lease 0: every heartbeat is already stale, as after the holder stalled past its lease.
    taker = _claim(heartbeat, SECOND, "task-b", lease=0.0)
    assert taker is not None

    assert not stalled.beat()
    assert stalled.lost.is_set()
    assert taker.beat()
    held = read_heartbeat_seen(s3, location).beat
    assert held is not None
    assert held.task_id == "task-b"


def test_two_workers_taking_over_one_stale_lease_at_once_leave_one_holder(
    heartbeat: tuple[S3Store, S3Location],
) -> None:
    s3, location = heartbeat
    assert _claim(heartbeat, FIRST, "task-a") is not None
    both_saw = read_heartbeat_seen(s3, location)
    retry = _claim(heartbeat, SECOND, "task-b", lease=0.0, seen=both_saw)
    other_retry = _claim(heartbeat, FIRST, "task-c", lease=0.0, seen=both_saw)
    assert retry is not None
    assert other_retry is None


def test_a_beat_whose_answer_was_lost_still_counts_as_the_holders(
    heartbeat: tuple[S3Store, S3Location],
) -> None:
    """The write landed but its ETag never reached the holder: the heartbeat is still its own."""
    holder = _claim(heartbeat, FIRST, "task-a")
    assert holder is not None
    answered = holder.etag
    assert holder.beat()
    holder.etag = answered  # as if the second write's answer had been lost
    assert holder.beat()
    assert not holder.lost.is_set()


def test_the_beating_thread_stops_once_the_lease_is_lost(heartbeat: tuple[S3Store, S3Location]) -> None:
    stalled = _claim(heartbeat, FIRST, "task-a")
    assert stalled is not None
    stalled.interval = 0.05
    assert _claim(heartbeat, SECOND, "task-b", lease=0.0) is not None
    with stalled:
        assert stalled.lost.wait(timeout=10)
    held = read_heartbeat_seen(*heartbeat).beat
    assert held is not None
    assert held.task_id == "task-b"


def test_a_heartbeat_deleted_under_its_holder_ends_the_hold(heartbeat: tuple[S3Store, S3Location]) -> None:
    """The job's staging prefix is cleaned when the job ends: a shard still beating stops."""
    s3, location = heartbeat
    holder = _claim(heartbeat, FIRST, "task-a")
    assert holder is not None
    s3.delete(location)
    assert not holder.beat()
    assert holder.lost.is_set()


def test_a_heartbeat_that_is_not_one_fails_the_job_naming_it(heartbeat: tuple[S3Store, S3Location]) -> None:
    s3, location = heartbeat
    s3.put_bytes(b'{"worker": "nobody"}', location)
    with pytest.raises(JobFailedError, match=f"{re.escape(location.uri)} is not a shard heartbeat"):
        read_heartbeat(s3, location)
