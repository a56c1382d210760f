"""Fixtures shared by the api's client and dashboard tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from db.settings import Settings
from stack.seaweedfs import S3Endpoint
from tests.client.client_stack import ClientStack, running_client_stack
from tests.worker.tiny_inputs import write_tiny_target


@pytest.fixture(scope="module")
def client_stack(
    worker_settings: Settings,
    worker_session_factory: sessionmaker[Session],
    seaweedfs: S3Endpoint,
    smollm2_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ClientStack]:
    """One api process and real Celery worker per module, with a tiny model and data on a fresh bucket."""
    tmp = tmp_path_factory.mktemp("client-stack")
    s3 = seaweedfs.client()
    bucket = f"client-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=bucket)
    target_dir = write_tiny_target(smollm2_dir, tmp / "tiny-target")
    with running_client_stack(
        worker_settings=worker_settings,
        session_factory=worker_session_factory,
        s3=s3,
        bucket=bucket,
        target_dir=target_dir,
        tmp=tmp,
    ) as running:
        yield running
