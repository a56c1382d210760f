"""Repository functions for accounts and their access keys."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.errors import NameAlreadyExistsError
from db.models.access_key import AccessKey
from db.models.account import DEV_ACCOUNT_ID, Account
from db.secret_box import decrypt_secret, encrypt_secret

DEV_ACCESS_KEY_ID = "test"
DEV_SECRET_ACCESS_KEY = "test"

_AWS_ACCOUNT_ID = re.compile(r"[0-9]{12}")
_ACCESS_KEY_ID = re.compile(r"[A-Za-z0-9_]{1,128}")
# AWS key ids are AKIA + 16 characters of base32 (upper-case letters and 2-7).
_KEY_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


@dataclass(frozen=True)
class AccessKeyCredentials:
    """What SigV4 verification needs: the secret in clear and the owning account."""

    access_key_id: str
    secret_access_key: str
    account_id: int
    aws_account_id: str


@dataclass(frozen=True)
class AccessKeyListing:
    access_key_id: str
    aws_account_id: str
    description: str | None
    created_at: str


def _require_aws_account_id(aws_account_id: str) -> None:
    if not _AWS_ACCOUNT_ID.fullmatch(aws_account_id):
        raise ValueError(f"account id must be exactly 12 digits, got {aws_account_id!r}")


def get_account_by_aws_id(session: Session, *, aws_account_id: str) -> Account | None:
    return session.scalar(select(Account).where(Account.aws_account_id == aws_account_id))


def get_or_create_account(session: Session, *, aws_account_id: str) -> Account:
    _require_aws_account_id(aws_account_id)
    account = get_account_by_aws_id(session, aws_account_id=aws_account_id)
    if account is not None:
        return account
    try:
        with session.begin_nested():
            account = Account(aws_account_id=aws_account_id)
            session.add(account)
    except IntegrityError:
        # Another transaction created it between our SELECT and INSERT.
        account = get_account_by_aws_id(session, aws_account_id=aws_account_id)
        if account is None:
            raise
    return account


def generate_access_key_id() -> str:
    return "AKIA" + "".join(secrets.choice(_KEY_ID_ALPHABET) for _ in range(16))


def generate_secret_access_key() -> str:
    return secrets.token_urlsafe(30)  # 40 characters, like AWS secrets


def create_access_key(
    session: Session,
    *,
    aws_account_id: str,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    description: str | None = None,
) -> tuple[AccessKey, str]:
    """Create a key for the account (creating the account too); returns the key and its secret."""
    account = get_or_create_account(session, aws_account_id=aws_account_id)
    key_id = access_key_id or generate_access_key_id()
    if not _ACCESS_KEY_ID.fullmatch(key_id):
        raise ValueError(f"access key id must be 1-128 letters, digits or '_', got {key_id!r}")
    secret = secret_access_key or generate_secret_access_key()
    if session.scalar(select(AccessKey.id).where(AccessKey.access_key_id == key_id)) is not None:
        raise NameAlreadyExistsError(key_id)
    key = AccessKey(
        access_key_id=key_id,
        secret_ciphertext=encrypt_secret(secret),
        description=description,
        account_id=account.id,
    )
    try:
        with session.begin_nested():
            session.add(key)
    except IntegrityError as error:
        raise NameAlreadyExistsError(key_id) from error
    return key, secret


def get_access_key_credentials(session: Session, *, access_key_id: str) -> AccessKeyCredentials | None:
    row = session.execute(
        select(AccessKey.secret_ciphertext, Account.id, Account.aws_account_id)
        .join(Account, Account.id == AccessKey.account_id)
        .where(AccessKey.access_key_id == access_key_id)
    ).one_or_none()
    if row is None:
        return None
    ciphertext, account_id, aws_account_id = row
    return AccessKeyCredentials(
        access_key_id=access_key_id,
        secret_access_key=decrypt_secret(ciphertext),
        account_id=account_id,
        aws_account_id=aws_account_id,
    )


def list_access_keys(session: Session, *, aws_account_id: str | None = None) -> list[AccessKeyListing]:
    statement = (
        select(AccessKey.access_key_id, Account.aws_account_id, AccessKey.description, AccessKey.created_at)
        .join(Account, Account.id == AccessKey.account_id)
        .order_by(Account.aws_account_id, AccessKey.created_at, AccessKey.id)
    )
    if aws_account_id is not None:
        statement = statement.where(Account.aws_account_id == aws_account_id)
    return [
        AccessKeyListing(
            access_key_id=key_id,
            aws_account_id=account,
            description=description,
            created_at=created_at.isoformat(),
        )
        for key_id, account, description, created_at in session.execute(statement)
    ]


def list_access_key_secrets(session: Session) -> list[tuple[str, str, str]]:
    """(12-digit account, key id, secret) of every key: the embedded S3 store's identities."""
    rows = session.execute(
        select(Account.aws_account_id, AccessKey.access_key_id, AccessKey.secret_ciphertext)
        .join(Account, Account.id == AccessKey.account_id)
        .order_by(Account.aws_account_id, AccessKey.id)
    )
    return [(account, key_id, decrypt_secret(ciphertext)) for account, key_id, ciphertext in rows]


def delete_access_key(session: Session, *, access_key_id: str) -> bool:
    """Delete a key; returns False when no such key exists."""
    key = session.scalar(select(AccessKey).where(AccessKey.access_key_id == access_key_id))
    if key is None:
        return False
    session.delete(key)
    session.flush()
    return True


def dev_access_key_exists(session: Session) -> bool:
    return (
        session.scalar(select(AccessKey.id).where(AccessKey.access_key_id == DEV_ACCESS_KEY_ID)) is not None
    )


def ensure_dev_access_key(session: Session) -> AccessKey:
    """The well-known ``test``/``test`` key of account 000000000000 (embedded stack, demos)."""
    existing = session.scalar(select(AccessKey).where(AccessKey.access_key_id == DEV_ACCESS_KEY_ID))
    if existing is not None:
        return existing
    try:
        key, _ = create_access_key(
            session,
            aws_account_id=DEV_ACCOUNT_ID,
            access_key_id=DEV_ACCESS_KEY_ID,
            secret_access_key=DEV_SECRET_ACCESS_KEY,
            description="development key (test/test)",
        )
    except NameAlreadyExistsError:
        # Several api workers start at once and seed concurrently; one of them wins.
        key = session.scalars(select(AccessKey).where(AccessKey.access_key_id == DEV_ACCESS_KEY_ID)).one()
    return key
