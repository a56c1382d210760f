"""Worker tests' own fixtures: the api as a separate process, an S3 endpoint that hangs, an
existing EAGLE head for the tiny target with SmolLM2's tokenizer (tests/fixtures/models.py), the
inputs an end-to-end job test puts on S3 and an operator's catalog of built-in datasets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from sqlalchemy.orm import Session, sessionmaker

from core.s3 import s3_client as settings_s3_client
from core.s3_store import S3Store
from db.session import session_scope
from db.settings import Settings
from tests.factories.accounts import AccountCredentials, create_account, use_account_role
from tests.fixtures.api_process import launch_api_process
from tests.worker.optimization_jobs import BUILTIN_DATASET, Inputs
from tests.worker.stalled_server import StalledServer
from tests.worker.tiny_inputs import sharegpt_jsonl, write_tiny_head
from tests.worker.worker_jobs import WorkerJobs
from worker.builtin_catalog import add_dataset, catalog_location


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


@pytest.fixture
def inputs(
    s3_client: Any, s3_bucket: str, tiny_smollm2_target_dir: Path, tiny_head_dir: Path, tmp_path: Path
) -> Inputs:
    return Inputs(s3_client, s3_bucket, tiny_smollm2_target_dir, tiny_head_dir, tmp_path)


@pytest.fixture(scope="module")
def builtin_catalog(worker_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> str:
    """An operator's catalog with one small dataset, listed the way `eaglenest datasets add` does."""
    path = tmp_path_factory.mktemp("builtin") / f"{BUILTIN_DATASET}.jsonl"
    path.write_text(sharegpt_jsonl(16, start=100))
    add_dataset(
        S3Store(settings_s3_client(worker_settings)),
        worker_settings,
        str(path),
        name=None,
        description="tiny",
    )
    return catalog_location(worker_settings).uri
