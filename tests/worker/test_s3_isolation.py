"""A job reads and writes S3 as its role, so one account's job cannot touch another's objects.

Accounts A and B each get a SeaweedFS identity limited to buckets named after their account
id (as the embedded stack gives them) and a role standing for it. B's jobs aimed at A's
model, data or output location fail with access denied, naming only the URI, and leave A's
objects as they were; A's own job on the same objects completes.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import get_optimization_job_by_id
from db.queries.role import create_role, role_arn
from db.session import session_scope
from db.settings import Settings
from stack.seaweedfs import S3Credentials, S3Identity
from tests.factories.accounts import AccountCredentials, create_account
from tests.factories.optimization_jobs import create_optimization_job
from tests.fixtures.seaweedfs import SeaweedFSServer
from tests.s3_buckets import delete_bucket_and_contents
from tests.worker.tiny_inputs import sharegpt_jsonl, upload_directory
from worker.job_store import JobStore
from worker.runner import run_optimization_job

SessionFactory = sessionmaker[Session]
ISOLATED_ROLE = "IsolatedRole"
# What B's failure reasons must never show of A's objects: their names and contents.
A_SECRET_LINE = "a-private-training-line"


@dataclass(frozen=True)
class Tenant:
    account: AccountCredentials
    bucket: str
    role_arn: str

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"


@pytest.fixture
def tenants(
    seaweedfs_server: SeaweedFSServer,
    worker_session_factory: SessionFactory,
    s3_client: Any,
    tiny_smollm2_target_dir: Path,
) -> Any:
    """Accounts A and B, each with a bucket of its own, a limited S3 identity and a role for it."""
    made: list[Tenant] = []
    for _ in range(2):
        with session_scope(worker_session_factory) as session:
            account = create_account(session)
            key = S3Credentials(f"ROLE{secrets.token_hex(8).upper()}", secrets.token_urlsafe(30))
            create_role(
                session,
                aws_account_id=account.aws_account_id,
                name=ISOLATED_ROLE,
                s3_access_key_id=key.access_key_id,
                s3_secret_access_key=key.secret_access_key,
            )
        prefix = f"{account.aws_account_id}-"
        seaweedfs_server.add_identity(S3Identity(account.aws_account_id, (key,), (prefix,)))
        bucket = f"{prefix}{uuid.uuid4().hex[:16]}"
        s3_client.create_bucket(Bucket=bucket)
        upload_directory(s3_client, tiny_smollm2_target_dir, bucket, "models/tiny")
        s3_client.put_object(Bucket=bucket, Key="data/train/part-0.jsonl", Body=sharegpt_jsonl(12).encode())
        made.append(
            Tenant(account, bucket, role_arn(aws_account_id=account.aws_account_id, name=ISOLATED_ROLE))
        )
    yield made
    for tenant in made:
        delete_bucket_and_contents(s3_client, tenant.bucket)


def _objects(s3_client: Any, bucket: str) -> dict[str, str]:
    listing = s3_client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {item["Key"]: item["ETag"] for item in listing}


def _run_job(
    factory: SessionFactory, settings: Settings, owner: Tenant, *, model: str, data: str, output: str
) -> Any:
    with session_scope(factory) as session:
        job = create_optimization_job(
            session,
            account_id=owner.account.account_id,
            aws_account_id=owner.account.aws_account_id,
            role_arn=owner.role_arn,
            model_source={"S3": {"S3Uri": model}},
            optimization_configs=[
                {
                    "ModelSpeculativeDecodingConfig": {
                        "Technique": "EAGLE",
                        "TrainingDataSource": {"S3Uri": data, "S3DataType": "S3Prefix"},
                    }
                }
            ],
            optimization_environment={"EAGLE_TRAIN_MAX_MINUTES": "0.05", "EAGLE_NUM_SPECULATIVE_TOKENS": "3"},
            output_config={"S3OutputLocation": output},
        )
        job_id = job.id
    run_optimization_job(
        job_id,
        store=JobStore(factory),
        settings=settings,
        poll_interval_seconds=0.2,
        interrupt_grace_seconds=2,
    )
    with session_scope(factory) as session:
        row = get_optimization_job_by_id(session, job_id=job_id)
        assert row is not None
        session.expunge(row)
        return row


@pytest.mark.parametrize("target", ["model", "data", "output"])
def test_a_job_cannot_reach_another_accounts_objects(
    tenants: list[Tenant],
    worker_session_factory: SessionFactory,
    worker_settings: Settings,
    s3_client: Any,
    target: str,
) -> None:
    a, b = tenants
    # A's data holds a malformed line: before roles, B's failure reason quoted A's file, line and error.
    s3_client.put_object(Bucket=a.bucket, Key="data/train/part-1.jsonl", Body=f"{A_SECRET_LINE}\n".encode())
    s3_client.put_object(Bucket=a.bucket, Key="out/lineage.json", Body=b'{"owner": "A"}')
    before = _objects(s3_client, a.bucket)
    where = {
        "model": b.uri("models/tiny/"),
        "data": b.uri("data/train/"),
        "output": b.uri(f"out-{uuid.uuid4().hex[:8]}/"),
    }
    aimed_at = {"model": a.uri("models/tiny/"), "data": a.uri("data/train/"), "output": a.uri("out/")}
    where[target] = aimed_at[target]

    job = _run_job(worker_session_factory, worker_settings, b, **where)

    assert job.status is Status.FAILED
    reason = job.failure_reason or ""
    assert "access denied" in reason.lower()
    assert aimed_at[target].rstrip("/") in reason
    assert A_SECRET_LINE not in reason
    assert "part-1.jsonl" not in reason
    assert _objects(s3_client, a.bucket) == before
    assert s3_client.get_object(Bucket=a.bucket, Key="out/lineage.json")["Body"].read() == b'{"owner": "A"}'


def test_a_job_whose_role_was_deleted_fails_naming_the_role(
    tenants: list[Tenant], worker_session_factory: SessionFactory, worker_settings: Settings
) -> None:
    a, _ = tenants
    gone = Tenant(a.account, a.bucket, role_arn(aws_account_id=a.account.aws_account_id, name="Deleted"))

    job = _run_job(
        worker_session_factory,
        worker_settings,
        gone,
        model=a.uri("models/tiny/"),
        data=a.uri("data/train/"),
        output=a.uri("out/"),
    )

    assert job.status is Status.FAILED
    assert job.failure_reason == (
        f"The job's role {gone.role_arn} is no longer registered to its account, so the job cannot access S3."
    )


@pytest.mark.e2e
def test_an_accounts_own_job_completes_with_its_limited_role(
    tenants: list[Tenant], worker_session_factory: SessionFactory, worker_settings: Settings, s3_client: Any
) -> None:
    a, _ = tenants
    job = _run_job(
        worker_session_factory,
        worker_settings,
        a,
        model=a.uri("models/tiny/"),
        data=a.uri("data/train/"),
        output=a.uri("own-job/"),
    )

    assert job.status is Status.COMPLETED, job.failure_reason
    assert "own-job/lineage.json" in _objects(s3_client, a.bucket)
