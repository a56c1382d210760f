"""Accounts with an access key, for tests that sign requests."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from db.queries.account import create_access_key, get_account_by_aws_id


@dataclass(frozen=True)
class AccountCredentials:
    account_id: int
    aws_account_id: str
    access_key_id: str
    secret_access_key: str


def random_aws_account_id() -> str:
    return "".join(secrets.choice("0123456789") for _ in range(12))


def create_account(session: Session, **overrides: Any) -> AccountCredentials:
    """A new account (random 12-digit id unless given) with one access key; flushed, not committed."""
    aws_account_id = overrides.pop("aws_account_id", random_aws_account_id())
    key, secret = create_access_key(session, aws_account_id=aws_account_id, **overrides)
    account = get_account_by_aws_id(session, aws_account_id=aws_account_id)
    assert account is not None
    return AccountCredentials(
        account_id=account.id,
        aws_account_id=aws_account_id,
        access_key_id=key.access_key_id,
        secret_access_key=secret,
    )
