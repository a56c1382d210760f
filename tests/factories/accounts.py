"""Accounts with an access key, for tests that sign requests."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from db.queries.account import create_access_key, get_account_by_aws_id
from db.queries.role import create_role, list_roles, role_arn

# Every test account gets this role. It stands for the test SeaweedFS's own credentials
# (tests/fixtures/seaweedfs.py), so jobs reach every test bucket unless a test registers a
# narrower role; the cross-account tests in tests/worker/test_s3_isolation.py do.
TEST_ROLE_NAME = "SageMakerRole"
TEST_ROLE_S3_CREDENTIALS = ("test", "test")
# The RoleArn the request factories put in bodies (tests/factories/optimization_jobs.py,
# sagemaker_models.py); ``use_account_role`` swaps it for the calling account's role.
FACTORY_ROLE_ARN = f"arn:aws:iam::111122223333:role/{TEST_ROLE_NAME}"
_ROLE_MEMBERS = ("RoleArn", "ExecutionRoleArn")


@dataclass(frozen=True)
class AccountCredentials:
    account_id: int
    aws_account_id: str
    access_key_id: str
    secret_access_key: str

    @property
    def role_arn(self) -> str:
        """The role every test account has (``create_account`` registers it)."""
        return role_arn(aws_account_id=self.aws_account_id, name=TEST_ROLE_NAME)


def random_aws_account_id() -> str:
    return "".join(secrets.choice("0123456789") for _ in range(12))


def create_account(session: Session, **overrides: Any) -> AccountCredentials:
    """A new account (random 12-digit id unless given) with one access key; flushed, not committed."""
    aws_account_id = overrides.pop("aws_account_id", random_aws_account_id())
    key, secret = create_access_key(session, aws_account_id=aws_account_id, **overrides)
    ensure_test_role(session, aws_account_id=aws_account_id)
    account = get_account_by_aws_id(session, aws_account_id=aws_account_id)
    assert account is not None
    return AccountCredentials(
        account_id=account.id,
        aws_account_id=aws_account_id,
        access_key_id=key.access_key_id,
        secret_access_key=secret,
    )


def ensure_test_role(session: Session, *, aws_account_id: str) -> None:
    """Register the account's ``TEST_ROLE_NAME`` role unless it has it (flushed, not committed)."""
    existing = {role.role_arn for role in list_roles(session, aws_account_id=aws_account_id)}
    if role_arn(aws_account_id=aws_account_id, name=TEST_ROLE_NAME) not in existing:
        create_role(
            session,
            aws_account_id=aws_account_id,
            name=TEST_ROLE_NAME,
            s3_access_key_id=TEST_ROLE_S3_CREDENTIALS[0],
            s3_secret_access_key=TEST_ROLE_S3_CREDENTIALS[1],
        )


def use_account_role(client: Any, account: AccountCredentials) -> Any:
    """Make ``client`` (boto3 SageMaker) send ``account``'s role where a body has the factories' one.

    Create* must name a role of the caller's account, and the request factories cannot know
    which account will send their body.
    """

    def fill_role(params: dict[str, Any], **_: Any) -> None:
        for member in _ROLE_MEMBERS:
            if params.get(member) == FACTORY_ROLE_ARN:
                params[member] = account.role_arn

    client.meta.events.register("before-parameter-build.sagemaker.*", fill_role)
    return client
