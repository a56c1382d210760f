"""Repository functions for roles: register, list and delete them, and resolve a RoleArn."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.errors import NameAlreadyExistsError
from db.models.account import DEV_ACCOUNT_ID, Account
from db.models.role import Role
from db.queries.account import (
    DEV_ACCESS_KEY_ID,
    DEV_SECRET_ACCESS_KEY,
    generate_access_key_id,
    generate_secret_access_key,
    get_account_by_aws_id,
    get_or_create_account,
)
from db.secret_box import decrypt_secret, encrypt_secret

# The roles the README (eaglenest) and `make demo` (SageMakerRole) pass as RoleArn; on the
# embedded stack they stand for the development key's own S3 identity.
DEV_ROLE_NAMES = ("eaglenest", "SageMakerRole")

# IAM role names (with an optional path): letters, digits and +=,.@_- separated by '/'.
_ROLE_NAME = re.compile(r"(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}")
# botocore's RoleArn pattern (sagemaker_shapes.json), split into account and role name.
_ROLE_ARN = re.compile(r"arn:aws[a-z\-]*:iam::(?P<account>\d{12}):role/?(?P<name>[a-zA-Z_0-9+=,.@\-_/]+)")


@dataclass(frozen=True)
class RoleCredentials:
    """The S3 key pair a job signs its S3 requests with."""

    role_arn: str
    access_key_id: str
    secret_access_key: str


@dataclass(frozen=True)
class RoleListing:
    role_arn: str
    aws_account_id: str
    s3_access_key_id: str
    description: str | None
    created_at: str


def role_arn(*, aws_account_id: str, name: str) -> str:
    return f"arn:aws:iam::{aws_account_id}:role/{name}"


def parse_role_arn(arn: str) -> tuple[str, str] | None:
    """(12-digit account, role name with path) of an IAM role ARN; None when it is not one."""
    match = _ROLE_ARN.fullmatch(arn)
    return None if match is None else (match["account"], match["name"])


def create_role(
    session: Session,
    *,
    aws_account_id: str,
    name: str,
    s3_access_key_id: str,
    s3_secret_access_key: str,
    description: str | None = None,
) -> Role:
    """Register a role for the account (creating the account too); flushed, not committed."""
    if not _ROLE_NAME.fullmatch(name) or len(name) > 512:
        raise ValueError(
            "role name must be 1-64 letters, digits or +=,.@_- characters, optionally after a "
            f"path, got {name!r}"
        )
    if not s3_access_key_id or not s3_secret_access_key:
        raise ValueError("a role needs both an S3 access key id and its secret")
    account = get_or_create_account(session, aws_account_id=aws_account_id)
    if _find_role(session, account_id=account.id, name=name) is not None:
        raise NameAlreadyExistsError(role_arn(aws_account_id=aws_account_id, name=name))
    role = Role(
        account_id=account.id,
        name=name,
        s3_access_key_id=s3_access_key_id,
        s3_secret_ciphertext=encrypt_secret(s3_secret_access_key),
        description=description,
    )
    try:
        with session.begin_nested():
            session.add(role)
    except IntegrityError as error:
        raise NameAlreadyExistsError(role_arn(aws_account_id=aws_account_id, name=name)) from error
    return role


def _find_role(session: Session, *, account_id: int, name: str) -> Role | None:
    return session.scalar(select(Role).where(Role.account_id == account_id, Role.name == name))


def account_has_role(session: Session, *, account_id: int, aws_account_id: str, arn: str) -> bool:
    """Whether ``arn`` names a role registered to this account (an ARN of another account never does)."""
    parsed = parse_role_arn(arn)
    if parsed is None or parsed[0] != aws_account_id:
        return False
    return _find_role(session, account_id=account_id, name=parsed[1]) is not None


def get_role_credentials(
    session: Session, *, account_id: int, aws_account_id: str, arn: str
) -> RoleCredentials | None:
    """The S3 key pair of the account's role ``arn``; None when the account has no such role."""
    parsed = parse_role_arn(arn)
    if parsed is None or parsed[0] != aws_account_id:
        return None
    role = _find_role(session, account_id=account_id, name=parsed[1])
    if role is None:
        return None
    return RoleCredentials(
        role_arn=arn,
        access_key_id=role.s3_access_key_id,
        secret_access_key=decrypt_secret(role.s3_secret_ciphertext),
    )


def list_roles(session: Session, *, aws_account_id: str | None = None) -> list[RoleListing]:
    statement = (
        select(Role.name, Account.aws_account_id, Role.s3_access_key_id, Role.description, Role.created_at)
        .join(Account, Account.id == Role.account_id)
        .order_by(Account.aws_account_id, Role.name)
    )
    if aws_account_id is not None:
        statement = statement.where(Account.aws_account_id == aws_account_id)
    return [
        RoleListing(
            role_arn=role_arn(aws_account_id=account, name=name),
            aws_account_id=account,
            s3_access_key_id=key_id,
            description=description,
            created_at=created_at.isoformat(),
        )
        for name, account, key_id, description, created_at in session.execute(statement)
    ]


def list_role_s3_keys(session: Session) -> list[tuple[str, str, str]]:
    """(12-digit account, S3 key id, S3 secret) of every role: the embedded S3 store's identities."""
    rows = session.execute(
        select(Account.aws_account_id, Role.s3_access_key_id, Role.s3_secret_ciphertext)
        .join(Account, Account.id == Role.account_id)
        .order_by(Account.aws_account_id, Role.id)
    )
    return [(account, key_id, decrypt_secret(ciphertext)) for account, key_id, ciphertext in rows]


def delete_role(session: Session, *, arn: str) -> bool:
    """Delete the role ``arn`` names; False when no such role exists. Running jobs then fail on S3."""
    parsed = parse_role_arn(arn)
    if parsed is None:
        return False
    account = get_account_by_aws_id(session, aws_account_id=parsed[0])
    role = None if account is None else _find_role(session, account_id=account.id, name=parsed[1])
    if role is None:
        return False
    session.delete(role)
    session.flush()
    return True


def ensure_account_role(session: Session, *, aws_account_id: str) -> str:
    """The account's ``eaglenest`` role (created with a fresh S3 key pair if missing); its ARN."""
    account = get_or_create_account(session, aws_account_id=aws_account_id)
    if _find_role(session, account_id=account.id, name=DEV_ROLE_NAMES[0]) is None:
        create_role(
            session,
            aws_account_id=aws_account_id,
            name=DEV_ROLE_NAMES[0],
            s3_access_key_id=generate_access_key_id(),
            s3_secret_access_key=generate_secret_access_key(),
            description="the account's role on the embedded stack",
        )
    return role_arn(aws_account_id=aws_account_id, name=DEV_ROLE_NAMES[0])


def ensure_dev_roles(session: Session) -> None:
    """The development account's roles (DEV_ROLE_NAMES), standing for the test/test S3 identity."""
    account = get_or_create_account(session, aws_account_id=DEV_ACCOUNT_ID)
    for name in DEV_ROLE_NAMES:
        if _find_role(session, account_id=account.id, name=name) is not None:
            continue
        try:
            create_role(
                session,
                aws_account_id=DEV_ACCOUNT_ID,
                name=name,
                s3_access_key_id=DEV_ACCESS_KEY_ID,
                s3_secret_access_key=DEV_SECRET_ACCESS_KEY,
                description="development role: the test/test S3 identity",
            )
        except NameAlreadyExistsError:
            continue  # another process seeding at the same time made it
