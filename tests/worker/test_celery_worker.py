"""A real Celery worker process on Redis; jobs created and stopped through the api with boto3."""

from __future__ import annotations

import time
from typing import Any

import pytest

from db.models.optimization_job_status import OptimizationJobStatus
from tests.fixtures.worker import StartCeleryWorker
from tests.worker.s3_models import upload_model
from tests.worker.stalled_server import StalledServer
from tests.worker.worker_jobs import WorkerJobs

pytestmark = pytest.mark.slow

FINISHED = {"COMPLETED", "FAILED", "STOPPED"}


def test_a_created_job_is_run_by_the_worker_and_fails_naming_its_missing_data(
    worker_jobs: WorkerJobs, start_celery_worker: StartCeleryWorker, s3_client: Any, s3_bucket: str
) -> None:
    start_celery_worker()
    # A complete model; the request's TrainingDataSource names a bucket that does not exist.
    name = worker_jobs.create(upload_model(s3_client, s3_bucket, "base"))

    job = worker_jobs.wait_for(name, FINISHED)

    assert job["OptimizationJobStatus"] == "FAILED"
    assert job["FailureReason"] == "S3 bucket does not exist: s3://data/train/"
    history = worker_jobs.history(name)
    assert history[:2] == [OptimizationJobStatus.STARTING, OptimizationJobStatus.INPROGRESS]
    assert OptimizationJobStatus.COMPLETED not in history


def test_stop_ends_a_running_job_stopped_within_ten_seconds(
    worker_jobs: WorkerJobs, start_celery_worker: StartCeleryWorker, stalled_s3: StalledServer
) -> None:
    # The worker's S3 hangs, so the validate stage blocks inside a socket read: the stop
    # has to interrupt a stage that cannot check its stop flag.
    start_celery_worker(s3_endpoint_url=stalled_s3.url)
    name = worker_jobs.create("s3://models/base/")
    worker_jobs.wait_for(name, {"INPROGRESS"})
    time.sleep(0.5)  # well inside the hanging S3 call

    stopped_at = time.monotonic()
    worker_jobs.stop(name)
    assert worker_jobs.status(name) in {"STOPPING", "STOPPED"}
    job = worker_jobs.wait_for(name, FINISHED, timeout=15)

    assert job["OptimizationJobStatus"] == "STOPPED"
    assert time.monotonic() - stopped_at < 10
    assert "FailureReason" not in job
    assert worker_jobs.history(name)[-2:] == [OptimizationJobStatus.STOPPING, OptimizationJobStatus.STOPPED]


def test_a_queued_job_that_is_stopped_never_runs(
    worker_jobs: WorkerJobs, start_celery_worker: StartCeleryWorker, stalled_s3: StalledServer
) -> None:
    start_celery_worker(s3_endpoint_url=stalled_s3.url)
    busy = worker_jobs.create("s3://models/base/")
    worker_jobs.wait_for(busy, {"INPROGRESS"})
    queued = worker_jobs.create("s3://models/base/")  # waits: the only worker process is busy

    worker_jobs.stop(queued)  # revoked while still in the queue
    worker_jobs.stop(busy)

    assert worker_jobs.wait_for(busy, FINISHED, timeout=15)["OptimizationJobStatus"] == "STOPPED"
    assert worker_jobs.wait_for(queued, FINISHED, timeout=15)["OptimizationJobStatus"] == "STOPPED"
    assert OptimizationJobStatus.INPROGRESS not in worker_jobs.history(queued)


def test_a_job_stopped_while_no_worker_runs_is_confirmed_when_one_starts(
    worker_jobs: WorkerJobs, start_celery_worker: StartCeleryWorker
) -> None:
    name = worker_jobs.create("s3://models/base/")
    worker_jobs.stop(name)  # no worker hears the revoke
    assert worker_jobs.status(name) == "STOPPING"

    start_celery_worker()

    assert worker_jobs.wait_for(name, FINISHED)["OptimizationJobStatus"] == "STOPPED"
    assert OptimizationJobStatus.INPROGRESS not in worker_jobs.history(name)


def test_max_runtime_fails_a_running_job_naming_the_limit(
    worker_jobs: WorkerJobs, start_celery_worker: StartCeleryWorker, stalled_s3: StalledServer
) -> None:
    start_celery_worker(s3_endpoint_url=stalled_s3.url)
    name = worker_jobs.create("s3://models/base/", max_runtime=2)
    started = worker_jobs.wait_for(name, {"INPROGRESS"})["OptimizationStartTime"]

    job = worker_jobs.wait_for(name, FINISHED, timeout=20)

    assert job["OptimizationJobStatus"] == "FAILED"
    assert job["FailureReason"] == "Job exceeded MaxRuntimeInSeconds (2 s)"
    assert 2 <= (job["OptimizationEndTime"] - started).total_seconds() < 10


def test_a_job_cut_off_by_a_worker_shutdown_is_resumed_by_the_next_worker(
    worker_jobs: WorkerJobs,
    start_celery_worker: StartCeleryWorker,
    stalled_s3: StalledServer,
    s3_bucket: str,
) -> None:
    first = start_celery_worker(s3_endpoint_url=stalled_s3.url, worker_shutdown_grace_seconds=1)
    name = worker_jobs.create(f"s3://{s3_bucket}/absent/")
    worker_jobs.wait_for(name, {"INPROGRESS"})

    first.stop()  # SIGTERM: 1 s of grace, then the job is cancelled and its message requeued
    assert first.exit_code() == 0
    assert worker_jobs.status(name) == "INPROGRESS"

    start_celery_worker()  # a healthy S3 this time

    job = worker_jobs.wait_for(name, FINISHED)
    assert job["FailureReason"] == f"Model file not found: s3://{s3_bucket}/absent/config.json"
    assert any("resumed" in message for _, message in worker_jobs.events(name))
