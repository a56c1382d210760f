"""A whole test stack for the client shim: an api process and a real Celery worker on their own
queue, the worker tests' Postgres database, SeaweedFS, and a tiny real model on S3.

The api runs as a process (not the in-thread live server) because ``core.job_queue`` reads
the queue from the process's EAGLENEST_* settings, and this queue must be one only this
module's worker consumes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from botocore.config import Config
from sqlalchemy.orm import Session, sessionmaker

from client import eaglenest_client
from db.models.account import DEV_ACCOUNT_ID
from db.queries.account import DEV_ACCESS_KEY_ID, DEV_SECRET_ACCESS_KEY, ensure_dev_access_key
from db.session import session_scope
from db.settings import Settings
from stack.processes import ManagedProcess
from tests.factories.accounts import AccountCredentials, ensure_test_role, use_account_role
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.fixtures.api_process import launch_api_process
from tests.fixtures.worker import TEST_REDIS_URL, launch_celery_worker, settings_as_env
from tests.worker.tiny_inputs import sharegpt_jsonl, upload_directory

# One optimizer step and a two-prompt benchmark: a whole job takes about ten seconds.
QUICK_TRAINING = {"EAGLE_TRAIN_MAX_MINUTES": "0.05", "EAGLE_NUM_SPECULATIVE_TOKENS": "3"}


@dataclass(frozen=True)
class ClientStack:
    api_url: str
    s3_endpoint_url: str
    region: str
    account: AccountCredentials
    s3: Any
    bucket: str
    model_uri: str
    data_uri: str
    worker: ManagedProcess

    def client(self, **config: Any) -> Any:
        client = eaglenest_client(
            self.api_url,
            self.region,
            (self.account.access_key_id, self.account.secret_access_key),
            config=Config(retries={"max_attempts": 1, "mode": "standard"}, **config),
        )
        return use_account_role(client, self.account)

    def create_job(self, *, model_uri: str | None = None, output_prefix: str | None = None) -> str:
        """CreateOptimizationJob on the tiny model and data; returns the job name."""
        request = create_optimization_job_request(
            ModelSource={"S3": {"S3Uri": model_uri or self.model_uri}},
            OptimizationEnvironment=QUICK_TRAINING,
            OptimizationConfigs=[
                {
                    "ModelSpeculativeDecodingConfig": {
                        "Technique": "EAGLE",
                        "TrainingDataSource": {"S3Uri": self.data_uri, "S3DataType": "S3Prefix"},
                    }
                }
            ],
            OutputConfig={
                "S3OutputLocation": f"s3://{self.bucket}/{output_prefix or 'out/' + uuid.uuid4().hex[:8]}/"
            },
            StoppingCondition={"MaxRuntimeInSeconds": 600},
        )
        self.client().create_optimization_job(**request)
        return str(request["OptimizationJobName"])


@contextmanager
def running_client_stack(
    *,
    worker_settings: Settings,
    session_factory: sessionmaker[Session],
    s3: Any,
    bucket: str,
    target_dir: Path,
    tmp: Path,
) -> Iterator[ClientStack]:
    settings = worker_settings.model_copy(update={"worker_queue": f"client-tests-{uuid.uuid4().hex[:12]}"})
    model_uri = upload_directory(s3, target_dir, bucket, "models/tiny")
    s3.put_object(Bucket=bucket, Key="data/train/part-0.jsonl", Body=sharegpt_jsonl(12).encode())
    with session_scope(session_factory) as session:
        # The embedded stack's development key, which SeaweedFS also accepts (test/test): the
        # client then reaches S3 with the very credentials it signs SageMaker calls with.
        key = ensure_dev_access_key(session)
        ensure_test_role(session, aws_account_id=DEV_ACCOUNT_ID)
        account = AccountCredentials(
            account_id=key.account_id,
            aws_account_id=DEV_ACCOUNT_ID,
            access_key_id=DEV_ACCESS_KEY_ID,
            secret_access_key=DEV_SECRET_ACCESS_KEY,
        )
    api = launch_api_process(settings_as_env(settings), tmp / "api.log")
    try:
        worker = launch_celery_worker(settings, tmp / "worker.log", "client-tests")
        try:
            yield ClientStack(
                api_url=api[0],
                s3_endpoint_url=str(settings.s3_endpoint_url),
                region=settings.default_region,
                account=account,
                s3=s3,
                bucket=bucket,
                model_uri=model_uri,
                data_uri=f"s3://{bucket}/data/train/",
                worker=worker,
            )
        finally:
            worker.stop()
    finally:
        api[1].stop()
        queue = settings.worker_queue
        redis.Redis.from_url(TEST_REDIS_URL).delete(
            queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}"
        )
