"""An endpoint whose worker is killed is supervised anew by another endpoint worker's reaper.

Its own module: the workers here use a short lease, and no other endpoint worker may take
the endpoint first.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from db.settings import Settings
from tests.factories.accounts import AccountCredentials
from tests.fixtures.worker import launch_endpoint_worker
from tests.worker.endpoint_clients import (
    deploy,
    instance_pid,
    instances,
    invoke_json,
    runtime_client,
    wait_for,
    wait_in_service,
)
from tests.worker.tiny_inputs import upload_directory

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
LEASE_SECONDS = 4.0


def test_a_killed_endpoint_worker_is_replaced(  # noqa: PLR0917 - fixtures
    worker_settings: Settings,
    worker_sagemaker: Any,
    worker_api_url: str,
    worker_account: AccountCredentials,
    worker_session_factory: sessionmaker[Session],
    s3_client: Any,
    s3_bucket: str,
    tiny_smollm2_target_dir: Path,
    tmp_path: Path,
) -> None:
    settings = worker_settings.model_copy(update={"endpoint_lease_seconds": LEASE_SECONDS})
    first = launch_endpoint_worker(settings, tmp_path / "first.log", "first")
    second = None
    try:
        model_uri = upload_directory(s3_client, tiny_smollm2_target_dir, s3_bucket, "models/tiny")
        name, _ = deploy(worker_sagemaker, model_uri=model_uri, head_uri=None)
        wait_in_service(worker_sagemaker, name)
        (before,) = instances(worker_session_factory, worker_account, name)
        os.killpg(first.pid, signal.SIGKILL)  # the worker and its whole group, at once
        wait_for(lambda: not first.is_running(), timeout=10, what="the first worker to die")

        second = launch_endpoint_worker(settings, tmp_path / "second.log", "second")
        wait_for(
            lambda: any(
                row.status == "InService" and row.message and instance_pid(row) != instance_pid(before)
                for row in instances(worker_session_factory, worker_account, name)
            ),
            timeout=120,
            what="a new supervisor to serve the endpoint",
        )
        runtime = runtime_client(worker_api_url, worker_account)
        assert invoke_json(runtime, name, {"inputs": "Back again", "parameters": {"max_new_tokens": 3}})
        assert worker_sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService"
        worker_sagemaker.delete_endpoint(EndpointName=name)
        worker_sagemaker.get_waiter("endpoint_deleted").wait(
            EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
    finally:
        first.stop()
        if second is not None:
            second.stop()
