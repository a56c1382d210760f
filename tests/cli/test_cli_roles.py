"""`eaglenest roles create|list|delete`, and the role `keys create` gives an embedded stack's account."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from db.queries.account import get_account_by_aws_id
from db.queries.role import get_role_credentials
from db.session import create_db_engine, create_session_factory
from migrations.runner import upgrade_to_head
from stack.layout import StateLayout
from stack.secret_key import state_dir_secret_key

ACCOUNT = "444455556666"
ARN = f"arn:aws:iam::{ACCOUNT}:role/service-role/Jobs"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StateLayout:
    monkeypatch.delenv("EAGLENEST_DATABASE_URL", raising=False)
    layout = StateLayout(tmp_path / "state")
    layout.root.mkdir()
    upgrade_to_head(layout.database_url)
    return layout


def _stored_credentials(layout: StateLayout, arn: str) -> tuple[str, str] | None:
    engine = create_db_engine(layout.database_url, pool_size=1, max_overflow=0)
    try:
        with state_dir_secret_key(layout.root), create_session_factory(engine)() as session:
            account = get_account_by_aws_id(session, aws_account_id=ACCOUNT)
            assert account is not None
            found = get_role_credentials(session, account_id=account.id, aws_account_id=ACCOUNT, arn=arn)
            return None if found is None else (found.access_key_id, found.secret_access_key)
    finally:
        engine.dispose()


def test_roles_create_list_delete(state: StateLayout, capsys: pytest.CaptureFixture[str]) -> None:
    roles = ["roles", "--state-dir", str(state.root)]
    create = [*roles, "create", "--account-id", ACCOUNT, "--role-name", "service-role/Jobs"]

    assert main([*create, "--s3-access-key-id", "S3KEY", "--s3-secret-access-key", "s3-secret"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "Role": {"Arn": ARN, "RoleName": "service-role/Jobs", "AccountId": ACCOUNT, "S3AccessKeyId": "S3KEY"}
    }
    # Stored encrypted, as access-key secrets are, and given back to the worker in clear.
    assert "s3-secret" not in state.database_file.read_bytes().decode(errors="replace")
    assert _stored_credentials(state, ARN) == ("S3KEY", "s3-secret")

    assert main([*roles, "list", "--account-id", ACCOUNT]) == 0
    (listed,) = json.loads(capsys.readouterr().out)["Roles"]
    assert (listed["Arn"], listed["S3AccessKeyId"]) == (ARN, "S3KEY")
    assert "s3-secret" not in json.dumps(listed)

    assert main(create) == 1
    assert f"role {ARN} already exists" in capsys.readouterr().err
    assert main([*roles, "delete", ARN]) == 0
    assert main([*roles, "delete", ARN]) == 1
    assert f"no role {ARN!r}" in capsys.readouterr().err
    assert _stored_credentials(state, ARN) is None


def test_roles_create_makes_a_key_pair_when_given_none(
    state: StateLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = ["roles", "--state-dir", str(state.root)]
    assert main([*roles, "create", "--account-id", ACCOUNT, "--role-name", "service-role/Jobs"]) == 0
    role = json.loads(capsys.readouterr().out)["Role"]
    assert _stored_credentials(state, ARN) == (role["S3AccessKeyId"], role["S3SecretAccessKey"])

    half = [*roles, "create", "--account-id", ACCOUNT, "--role-name", "Other", "--s3-access-key-id", "K"]
    assert main(half) == 2
    assert "or neither" in capsys.readouterr().err
    assert main([*roles, "create", "--account-id", ACCOUNT, "--role-name", "bad name"]) == 2


def test_keys_create_on_the_embedded_stack_gives_the_account_a_role(
    state: StateLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "--state-dir", str(state.root), "create", "--account-id", ACCOUNT]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["Role"] == {"Arn": f"arn:aws:iam::{ACCOUNT}:role/eaglenest"}
    assert _stored_credentials(state, created["Role"]["Arn"]) is not None
