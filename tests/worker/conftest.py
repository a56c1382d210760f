"""Worker tests' own fixtures: the api as a separate process, an S3 endpoint that hangs, and an
existing EAGLE head for the tiny target with SmolLM2's tokenizer (tests/fixtures/models.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from sqlalchemy.orm import Session, sessionmaker

from db.session import session_scope
from tests.factories.accounts import AccountCredentials, create_account, use_account_role
from tests.fixtures.api_process import launch_api_process
from tests.worker.stalled_server import StalledServer
from tests.worker.tiny_inputs import write_tiny_head
from tests.worker.worker_jobs import WorkerJobs


@pytest.fixture(scope="module")
def worker_api_url(worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`eaglenest api` in its own process, on the worker tests' database and queue."""
    url, process = launch_api_process(worker_env, tmp_path_factory.mktemp("worker-api") / "api.log")
    try:
        yield url
    finally:
        process.stop()


@pytest.fixture
def worker_account(worker_session_factory: sessionmaker[Session]) -> AccountCredentials:
    """A fresh account with an access key in the worker tests' database."""
    with session_scope(worker_session_factory) as session:
        return create_account(session)


@pytest.fixture
def worker_sagemaker(worker_api_url: str, worker_account: AccountCredentials) -> Any:
    """boto3's SageMaker client for ``worker_account`` against ``worker_api_url``."""
    client = boto3.client(
        "sagemaker",
        endpoint_url=worker_api_url,
        aws_access_key_id=worker_account.access_key_id,
        aws_secret_access_key=worker_account.secret_access_key,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )
    return use_account_role(client, worker_account)


@pytest.fixture
def stalled_s3() -> Iterator[StalledServer]:
    server = StalledServer()
    yield server
    server.close()


@pytest.fixture
def worker_jobs(
    worker_sagemaker: Any, worker_account: AccountCredentials, worker_session_factory: sessionmaker[Session]
) -> WorkerJobs:
    return WorkerJobs(worker_sagemaker, worker_account, worker_session_factory)


@pytest.fixture(scope="session")
def tiny_head_dir(tiny_smollm2_target_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An existing (untrained) EAGLE-3 head for ``tiny_smollm2_target_dir``, in the native format."""
    return write_tiny_head(tiny_smollm2_target_dir, tmp_path_factory.mktemp("tiny-head") / "eagle_model")
