"""The embedded stack's S3 identities: each account reaches its own buckets only, on a real SeaweedFS.

The identities come from the stack's database (access keys and roles), as ``eaglenest up``
builds them, and are applied to a running `weed mini` by rewriting its file and SIGHUP.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from sqlalchemy.orm import Session, sessionmaker

from core.s3 import S3Location
from core.s3_store import S3Store
from db.models.account import DEV_ACCOUNT_ID
from db.queries.account import create_access_key, ensure_dev_access_key, get_account_by_aws_id
from db.queries.role import RoleCredentials, ensure_account_role, ensure_dev_roles, get_role_credentials
from db.session import create_db_engine, create_session_factory, session_scope
from migrations.runner import upgrade_to_head
from stack.s3_identities import S3IdentitySync, account_bucket_prefixes, load_or_create_admin_credentials
from stack.seaweedfs import S3_IDENTITIES_FILE, S3Endpoint, start_seaweedfs
from stack.supervisor import Supervisor

OTHER = "111122223333"
DATASETS = "eaglenest-datasets"


def _code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    url = f"sqlite:///{tmp_path / 'stack.db'}"
    upgrade_to_head(url)
    engine = create_db_engine(url, pool_size=1, max_overflow=0)
    yield create_session_factory(engine)
    engine.dispose()


def test_bucket_ownership_by_name() -> None:
    assert account_bucket_prefixes(OTHER) == (f"{OTHER}-",)
    dev = account_bucket_prefixes(DEV_ACCOUNT_ID)
    assert dev[0] == f"{DEV_ACCOUNT_ID}-"
    # Every name that starts with a letter (models, demo-data, ...) is the development account's.
    assert "".join(dev[1:]) == "abcdefghijklmnopqrstuvwxyz"


def _seed(sessions: sessionmaker[Session]) -> tuple[str, RoleCredentials]:
    """The dev key and roles, and account OTHER with key AKIAOTHER and its role: (secret, role)."""
    with session_scope(sessions) as session:
        ensure_dev_access_key(session)
        ensure_dev_roles(session)
        _, other_secret = create_access_key(session, aws_account_id=OTHER, access_key_id="AKIAOTHER")
        other_role_arn = ensure_account_role(session, aws_account_id=OTHER)
        account = get_account_by_aws_id(session, aws_account_id=OTHER)
        assert account is not None
        role = get_role_credentials(session, account_id=account.id, aws_account_id=OTHER, arn=other_role_arn)
        assert role is not None
    return other_secret, role


def test_each_account_reaches_only_its_own_buckets(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    other_secret, role = _seed(sessions)
    admin = load_or_create_admin_credentials(tmp_path / "s3")
    assert load_or_create_admin_credentials(tmp_path / "s3") == admin  # kept for the next `up`
    with Supervisor() as supervisor:
        endpoint, process = start_seaweedfs(supervisor, root=tmp_path / "s3", credentials=admin)
        sync = S3IdentitySync(
            identities_file=tmp_path / "s3" / S3_IDENTITIES_FILE,
            admin=admin,
            shared_buckets=(DATASETS,),
            seaweedfs=lambda: process,
            sessions=sessions,
        )
        assert sync.sync_once()
        assert not sync.sync_once()  # nothing changed: no rewrite, no reload

        def client(key_id: str, secret: str) -> Any:
            s3 = S3Endpoint(endpoint.endpoint_url, key_id, secret).client()
            _eventually(s3.list_buckets)
            return s3

        dev = client("test", "test")
        other = client("AKIAOTHER", other_secret)
        other_role = client(role.access_key_id, role.secret_access_key)
        # The README publishes the built-in datasets with the dev key, as `datasets publish` does.
        datasets = S3Store(dev)
        datasets.ensure_bucket(DATASETS)
        datasets.put_bytes(b"[]", S3Location(DATASETS, "builtin/catalog.json"))

        # The README's flow with the dev key, unchanged: a bucket named as it likes.
        dev.create_bucket(Bucket="models")
        dev.put_object(Bucket="models", Key="smollm2/config.json", Body=b"{}")
        for s3 in (other, other_role):
            with pytest.raises(ClientError) as denied:
                s3.get_object(Bucket="models", Key="smollm2/config.json")
            assert _code(denied) == "AccessDenied"
            with pytest.raises(ClientError) as denied:
                s3.put_object(Bucket="models", Key="smollm2/config.json", Body=b"overwritten")
            assert _code(denied) == "AccessDenied"
            with pytest.raises(ClientError) as denied:
                s3.create_bucket(Bucket="other-models")
            assert _code(denied) == "AccessDenied"
            # The built-in datasets are readable by every account, writable by none of them.
            assert s3.get_object(Bucket=DATASETS, Key="builtin/catalog.json")["Body"].read() == b"[]"
            with pytest.raises(ClientError) as denied:
                s3.put_object(Bucket=DATASETS, Key="builtin/catalog.json", Body=b"{}")
            assert _code(denied) == "AccessDenied"
        assert dev.get_object(Bucket="models", Key="smollm2/config.json")["Body"].read() == b"{}"

        # The other account's own buckets: its key and its role's key both reach them; dev's does not.
        other.create_bucket(Bucket=f"{OTHER}-models")
        other_role.put_object(Bucket=f"{OTHER}-models", Key="m/config.json", Body=b"{}")
        with pytest.raises(ClientError) as denied:
            dev.get_object(Bucket=f"{OTHER}-models", Key="m/config.json")
        assert _code(denied) == "AccessDenied"

        # A key created while the stack runs is picked up by the next sync.
        with session_scope(sessions) as session:
            _, late_secret = create_access_key(session, aws_account_id=OTHER, access_key_id="AKIALATE")
        assert sync.sync_once()
        late = client("AKIALATE", late_secret)
        assert late.get_object(Bucket=f"{OTHER}-models", Key="m/config.json")["Body"].read() == b"{}"


def _eventually(call: Any) -> None:
    """SeaweedFS applies a reload a moment after SIGHUP."""
    deadline = time.monotonic() + 10
    while True:
        try:
            call()
            return
        except ClientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
