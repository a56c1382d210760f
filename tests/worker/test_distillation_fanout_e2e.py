"""A job's distillation fanned out over two real Celery workers on Redis (worker.fanout).

One worker is killed (SIGKILL, its whole process group) while it distils a shard: the job's
own worker sees the shard's heartbeat stop, takes the shard again, and the job completes
with the very records a single worker without fan-out distils from the same data.
A stopped job ends its shards: nothing more is distilled and the job ends STOPPED.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import pytest

from db.settings import Settings
from stack.processes import ManagedProcess
from tests.fixtures.worker import StartCeleryWorker
from tests.worker.optimization_jobs import Inputs, completed, create_job
from tests.worker.tiny_inputs import sharegpt_jsonl
from tests.worker.worker_jobs import WorkerJobs

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


DISTILLING = {"EAGLE_REGENERATE": "true", "EAGLE_NUM_SPECULATIVE_TOKENS": "3"}
CONVERSATIONS = 64
# Batches of 2, so chunks (and shards) of 16 conversations: four shards of 32-token replies.
FANOUT = {"distillation_shard_conversations": 16, "distillation_shard_lease_seconds": 3.0}


def _settings(worker_settings: Settings, cache_uri: str) -> dict[str, Any]:
    return {
        "distillation_cache_uri": cache_uri,
        "train_overrides": worker_settings.train_overrides
        | {"regenerate_max_new_tokens": 32, "regenerate_batch_size": 2, "max_steps": 2},
        "benchmark_overrides": worker_settings.benchmark_overrides | {"concurrency": [1]},
    }


def _records(inputs: Inputs, lineage: dict[str, Any]) -> list[dict[str, Any]]:
    """The records the job added to the distillation cache (all it distilled), in order."""
    key = lineage["distillation_cache"]["new_part"].removeprefix(f"s3://{inputs.bucket}/")
    body = inputs.s3.get_object(Bucket=inputs.bucket, Key=key)["Body"].read().decode()
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def _staged_json(inputs: Inputs, output_uri: str, job_id: int, key: str) -> dict[str, Any] | None:
    prefix = output_uri.removeprefix(f"s3://{inputs.bucket}/")
    try:
        body = inputs.s3.get_object(Bucket=inputs.bucket, Key=f"{prefix}_staging/job-{job_id}/{key}")
    except inputs.s3.exceptions.NoSuchKey:
        return None
    document: dict[str, Any] = json.loads(body["Body"].read())
    return document


def _parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def _kill_a_shard_worker(
    inputs: Inputs, jobs: WorkerJobs, name: str, output_uri: str, workers: list[ManagedProcess]
) -> tuple[int, int]:
    """Wait until a worker other than the job's own holds a shard it has not finished, then kill
    that worker's whole process group; returns (shard, pid of the process that held it)."""
    job_id = jobs.row(name).id
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        plan = _staged_json(inputs, output_uri, job_id, "distillation/plan.json")
        if plan is not None:
            coordinator = plan["coordinator"]["pid"]
            for shard in plan["shards"]:
                base = f"distillation/shards/shard-{shard['index']:05d}/"
                beat = _staged_json(inputs, output_uri, job_id, base + "heartbeat.json")
                if beat is None or beat["worker"]["pid"] == coordinator:
                    continue
                if _staged_json(inputs, output_uri, job_id, base + "result.json") is not None:
                    continue
                holder = _parent_pid(beat["worker"]["pid"])
                victim = next(worker for worker in workers if worker.pid == holder)
                os.killpg(victim.pid, signal.SIGKILL)
                return shard["index"], beat["worker"]["pid"]
        time.sleep(0.1)
    pytest.fail(f"no shard of {name} was taken by the second worker: {jobs.row(name).last_message}")


def test_a_worker_killed_mid_shard_loses_nothing_and_the_records_equal_one_workers(
    worker_jobs: WorkerJobs, worker_settings: Settings, start_celery_worker: StartCeleryWorker, inputs: Inputs
) -> None:
    model = {"S3": {"S3Uri": inputs.model()}}
    inputs.text("data/train/part-0.jsonl", sharegpt_jsonl(CONVERSATIONS))
    data = {"S3Uri": inputs.uri("data/train/"), "S3DataType": "S3Prefix"}

    fanned_settings = _settings(worker_settings, inputs.uri("cache-fanned/")) | FANOUT
    workers = [start_celery_worker(**fanned_settings), start_celery_worker(**fanned_settings)]
    fanned_uri = inputs.uri("out/fanned/")
    name = create_job(
        worker_jobs, model_source=model, data_source=data, output_uri=fanned_uri, environment=DISTILLING
    )
    killed_shard, killed_pid = _kill_a_shard_worker(inputs, worker_jobs, name, fanned_uri, workers)
    fanned = inputs.published(fanned_uri, completed(worker_jobs, name)).lineage
    for worker in workers:
        worker.stop()

    single = start_celery_worker(**_settings(worker_settings, inputs.uri("cache-single/")))
    single_uri = inputs.uri("out/single/")
    name_single = create_job(
        worker_jobs, model_source=model, data_source=data, output_uri=single_uri, environment=DISTILLING
    )
    alone = inputs.published(single_uri, completed(worker_jobs, name_single)).lineage
    assert single.is_running(), single.log_tail()

    fanout = fanned["distillation_fanout"]
    assert alone["distillation_fanout"] is None
    assert [shard["index"] for shard in fanout["shards"]] == [0, 1, 2, 3]
    assert fanout["missing_shards"] == []
    assert killed_shard in fanout["retried_shards"]
    assert fanout["shards"][killed_shard]["worker"]["pid"] != killed_pid
    # The second worker died on its first shard: the job's own worker distilled all four.
    assert {shard["worker"]["pid"] for shard in fanout["shards"]} == {fanout["coordinator"]["pid"]}
    # Every conversation distilled once, the same replies as one worker's, in the same order.
    records = _records(inputs, fanned)
    assert len(records) == fanout["records"] == alone["distillation_cache"]["new"]
    assert records == _records(inputs, alone)
    events = [message for _, message in worker_jobs.events(name)]
    assert any(f"Shard {killed_shard}: no heartbeat" in message for message in events)


def test_stop_ends_every_shard(
    worker_jobs: WorkerJobs, worker_settings: Settings, start_celery_worker: StartCeleryWorker, inputs: Inputs
) -> None:
    settings = _settings(worker_settings, inputs.uri("cache-stopped/")) | FANOUT
    settings["train_overrides"] = settings["train_overrides"] | {"regenerate_max_new_tokens": 200}
    workers = [start_celery_worker(**settings), start_celery_worker(**settings)]
    inputs.text("data/train/part-0.jsonl", sharegpt_jsonl(CONVERSATIONS))
    output_uri = inputs.uri("out/stopped/")
    name = create_job(
        worker_jobs,
        model_source={"S3": {"S3Uri": inputs.model()}},
        data_source={"S3Uri": inputs.uri("data/train/"), "S3DataType": "S3Prefix"},
        output_uri=output_uri,
        environment=DISTILLING,
    )
    worker_jobs.wait_until(name, lambda job: "running on" in (job.last_message or ""), timeout=120)
    worker_jobs.stop(name)
    job = worker_jobs.wait_for(name, {"STOPPED", "FAILED", "COMPLETED"}, timeout=60)
    assert job["OptimizationJobStatus"] == "STOPPED", job.get("FailureReason")
    job_id = worker_jobs.row(name).id

    def shard_files() -> list[Any]:
        return [
            _staged_json(inputs, output_uri, job_id, f"distillation/shards/shard-{index:05d}/{file}")
            for index in range(4)
            for file in ("heartbeat.json", "result.json")
        ]

    # The shards ended with the job: no heartbeat moves and nothing is handed in any more, and
    # both workers are still there for the next job.
    time.sleep(FANOUT["distillation_shard_lease_seconds"])
    after_stop = shard_files()
    time.sleep(2 * FANOUT["distillation_shard_lease_seconds"])
    assert shard_files() == after_stop
    assert any(file is not None for file in after_stop)  # the shards had started
    assert all(worker.is_running() for worker in workers)


def test_the_distillation_deadline_ends_the_shards_and_training_goes_on_with_what_they_wrote(
    worker_jobs: WorkerJobs, worker_settings: Settings, start_celery_worker: StartCeleryWorker, inputs: Inputs
) -> None:
    """EAGLE_TRAIN_MAX_MINUTES=0.15: 9 s, 70 % of it (regenerate_budget_fraction) to distil."""
    settings = _settings(worker_settings, inputs.uri("cache-deadline/")) | FANOUT
    settings["train_overrides"] = settings["train_overrides"] | {"regenerate_max_new_tokens": 200}
    for _ in range(2):
        start_celery_worker(**settings)
    inputs.text("data/train/part-0.jsonl", sharegpt_jsonl(CONVERSATIONS))
    output_uri = inputs.uri("out/deadline/")
    name = create_job(
        worker_jobs,
        model_source={"S3": {"S3Uri": inputs.model()}},
        data_source={"S3Uri": inputs.uri("data/train/"), "S3DataType": "S3Prefix"},
        output_uri=output_uri,
        environment=DISTILLING | {"EAGLE_TRAIN_MAX_MINUTES": "0.15"},
    )
    lineage = inputs.published(output_uri, completed(worker_jobs, name)).lineage

    fanout = lineage["distillation_fanout"]
    cut = fanout["missing_shards"] or [s["index"] for s in fanout["shards"] if s["stopped"]]
    assert cut, fanout  # the deadline came before every reply was written
    assert 0 < fanout["records"] < CONVERSATIONS
    # The shards stopped at the deadline (6.3 s after planning), not when their work was done.
    assert fanout["seconds"] < 0.7 * 9 + FANOUT["distillation_shard_lease_seconds"] + 5
    assert lineage["distillation_cache"]["new"] == fanout["records"]
