"""Jobs go to the queue their DeploymentInstanceType maps to, and `eaglenest worker --queues`
consumes only those; each stage's event names the worker process (and device) that ran it."""

from __future__ import annotations

import base64
import json
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import redis
from botocore.config import Config
from sqlalchemy.orm import Session, sessionmaker

from db.queries.optimization_job import list_job_events
from db.session import session_scope
from db.settings import Settings
from stack.processes import ManagedProcess, ProcessSpec
from tests.factories.accounts import AccountCredentials, use_account_role
from tests.fixtures.api_process import launch_api_process
from tests.fixtures.worker import _wait_for_worker_ready, settings_as_env
from tests.worker.worker_jobs import WorkerJobs

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture
def routed_settings(worker_settings: Settings) -> Iterator[Settings]:
    """Queues of their own: ml.g5.* to '<queue>.gpu', everything else to '<queue>.cpu'."""
    base = f"{worker_settings.worker_queue}-routing-{uuid.uuid4().hex[:6]}"
    settings = worker_settings.model_copy(
        update={"worker_queue": f"{base}.cpu", "instance_type_queues": {"ml.g5.*": f"{base}.gpu"}}
    )
    yield settings
    broker = redis.Redis.from_url(settings.broker_url)
    for queue in (f"{base}.cpu", f"{base}.gpu"):
        broker.delete(queue, f"_kombu.binding.{queue}")


@pytest.fixture
def routed_jobs(
    routed_settings: Settings,
    worker_account: AccountCredentials,
    worker_session_factory: sessionmaker[Session],
    tmp_path: Path,
) -> Iterator[WorkerJobs]:
    url, api = launch_api_process(settings_as_env(routed_settings), tmp_path / "api.log")
    client = boto3.client(
        "sagemaker",
        endpoint_url=url,
        aws_access_key_id=worker_account.access_key_id,
        aws_secret_access_key=worker_account.secret_access_key,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )
    try:
        yield WorkerJobs(use_account_role(client, worker_account), worker_account, worker_session_factory)
    finally:
        api.stop()


@pytest.fixture
def gpu_worker(routed_settings: Settings, tmp_path: Path) -> Iterator[ManagedProcess]:
    """`eaglenest worker --queues <queue>.gpu`, as the GPU service of docker-compose runs it."""
    [gpu_queue] = routed_settings.instance_type_queues.values()
    process = ManagedProcess(
        ProcessSpec(
            name="gpu-worker",
            argv=[sys.executable, "-m", "cli.main", "worker", "--queues", gpu_queue],
            env={**settings_as_env(routed_settings), "REMAP_SIGTERM": "SIGQUIT"},
            log_path=tmp_path / "gpu-worker.log",
            stop_timeout_seconds=10.0,
        )
    )
    process.start()
    try:
        _wait_for_worker_ready(process)
        yield process
    finally:
        process.stop()


def _queued_job_ids(settings: Settings, queue: str) -> list[int]:
    raw = redis.Redis.from_url(settings.broker_url).lrange(queue, 0, -1)
    return [json.loads(base64.b64decode(json.loads(item)["body"]))[0][0] for item in raw]


def test_a_gpu_instance_type_runs_on_the_gpu_queue_worker_and_others_wait_on_the_cpu_queue(
    routed_settings: Settings,
    routed_jobs: WorkerJobs,
    gpu_worker: ManagedProcess,
    worker_session_factory: sessionmaker[Session],
) -> None:
    # The model prefix is empty: the job fails in 'validate', which is enough to see who ran it.
    on_gpu = routed_jobs.create_request(DeploymentInstanceType="ml.g5.2xlarge")
    on_cpu = routed_jobs.create_request(DeploymentInstanceType="ml.inf2.xlarge")

    finished = routed_jobs.wait_for(on_gpu, {"FAILED", "COMPLETED", "STOPPED"}, timeout=120)
    assert finished["OptimizationJobStatus"] == "FAILED", finished
    time.sleep(2)
    assert routed_jobs.status(on_cpu) == "STARTING"  # nobody consumes the cpu queue here
    assert _queued_job_ids(routed_settings, routed_settings.worker_queue) == [routed_jobs.row(on_cpu).id]

    with session_scope(worker_session_factory) as session:
        events = list_job_events(session, job_id=routed_jobs.row(on_gpu).id)
        workers: list[dict[str, Any]] = [e.worker for e in events if e.stage == "validate" and e.worker]
    assert workers, [(e.stage, e.message) for e in events]
    assert workers[0]["hostname"] == socket.gethostname()
    assert workers[0]["pid"] != gpu_worker.pid  # its pool process ran the job
    assert workers[0]["device"] == "cpu"  # no GPU on the test machine
    task_id = routed_jobs.row(on_gpu).celery_task_id
    assert f"[{task_id}] received" in gpu_worker.log_tail(400)
