"""Accounts and access keys: secrets encrypted at rest, the dev key, listing and deletion."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.errors import NameAlreadyExistsError
from db.models.access_key import AccessKey
from db.queries.account import (
    DEV_ACCESS_KEY_ID,
    create_access_key,
    delete_access_key,
    dev_access_key_exists,
    ensure_dev_access_key,
    get_access_key_credentials,
    get_or_create_account,
    list_access_keys,
)


def test_generated_key_pair_looks_like_aws_and_decrypts(db_session: Session) -> None:
    key, secret = create_access_key(db_session, aws_account_id="111122223333", description="ci")
    assert key.access_key_id.startswith("AKIA")
    assert len(key.access_key_id) == 20
    assert len(secret) == 40
    stored = db_session.scalar(select(AccessKey.secret_ciphertext).where(AccessKey.id == key.id))
    assert stored is not None
    assert secret not in stored, "the secret must not be stored in clear"
    credentials = get_access_key_credentials(db_session, access_key_id=key.access_key_id)
    assert credentials is not None
    assert credentials.secret_access_key == secret
    assert credentials.aws_account_id == "111122223333"


def test_unknown_key_has_no_credentials(db_session: Session) -> None:
    assert get_access_key_credentials(db_session, access_key_id="AKIANOSUCHKEY0000000") is None


def test_explicit_key_ids_must_be_unique(db_session: Session) -> None:
    create_access_key(
        db_session, aws_account_id="111122223333", access_key_id="FIXEDKEY", secret_access_key="s"
    )
    with pytest.raises(NameAlreadyExistsError):
        create_access_key(db_session, aws_account_id="444455556666", access_key_id="FIXEDKEY")


@pytest.mark.parametrize("bad", ["12345", "1234567890123", "11112222333x", ""])
def test_account_ids_must_be_twelve_digits(db_session: Session, bad: str) -> None:
    with pytest.raises(ValueError, match="12 digits"):
        get_or_create_account(db_session, aws_account_id=bad)


def test_bad_access_key_id_is_refused(db_session: Session) -> None:
    with pytest.raises(ValueError, match="access key id"):
        create_access_key(db_session, aws_account_id="111122223333", access_key_id="has space")


def test_dev_key_is_created_once(db_session: Session) -> None:
    if dev_access_key_exists(db_session):  # another test's committed data; start from scratch
        delete_access_key(db_session, access_key_id=DEV_ACCESS_KEY_ID)
    first = ensure_dev_access_key(db_session)
    second = ensure_dev_access_key(db_session)
    assert first.id == second.id
    credentials = get_access_key_credentials(db_session, access_key_id="test")
    assert credentials is not None
    assert (credentials.secret_access_key, credentials.aws_account_id) == ("test", "000000000000")
    assert dev_access_key_exists(db_session)


def test_list_and_delete(db_session: Session) -> None:
    key_a, _ = create_access_key(db_session, aws_account_id="210987654321")
    key_b, _ = create_access_key(db_session, aws_account_id="210987654321", description="second")
    create_access_key(db_session, aws_account_id="310987654321")
    listed = list_access_keys(db_session, aws_account_id="210987654321")
    assert [key.access_key_id for key in listed] == [key_a.access_key_id, key_b.access_key_id]
    assert listed[1].description == "second"
    assert delete_access_key(db_session, access_key_id=key_a.access_key_id) is True
    assert delete_access_key(db_session, access_key_id=key_a.access_key_id) is False
    assert [key.access_key_id for key in list_access_keys(db_session, aws_account_id="210987654321")] == [
        key_b.access_key_id
    ]
