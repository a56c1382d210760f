"""Rotating EAGLENEST_SECRET_KEY: previous keys still decrypt, and `keys reencrypt` moves every
stored secret to the new key."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from db.queries.account import create_access_key, get_access_key_credentials
from db.queries.secret_rotation import reencrypt_stored_secrets
from db.secret_box import SecretDecryptionError
from db.session import create_db_engine, create_session_factory
from db.settings import get_settings
from migrations.runner import upgrade_to_head

UseKeys = Callable[..., None]


@pytest.fixture
def use_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[UseKeys]:
    def use(current: str, *previous: str) -> None:
        monkeypatch.setenv("EAGLENEST_SECRET_KEY", current)
        monkeypatch.setenv("EAGLENEST_PREVIOUS_SECRET_KEYS", ",".join(previous))
        get_settings.cache_clear()

    yield use
    get_settings.cache_clear()  # monkeypatch restores the environment after this


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    url = f"sqlite:///{tmp_path / 'keys.sqlite3'}"
    upgrade_to_head(url)
    engine = create_db_engine(url)
    with create_session_factory(engine)() as session:
        yield session
    engine.dispose()


def secret_of(session: Session, key_id: str) -> str:
    credentials = get_access_key_credentials(session, access_key_id=key_id)
    assert credentials is not None
    return credentials.secret_access_key


def test_a_rotated_key_keeps_existing_access_keys_usable(session: Session, use_keys: UseKeys) -> None:
    use_keys("old-key")
    key, secret = create_access_key(session, aws_account_id="111122223333")
    session.commit()

    use_keys("new-key")
    with pytest.raises(SecretDecryptionError, match="EAGLENEST_PREVIOUS_SECRET_KEYS"):
        secret_of(session, key.access_key_id)

    use_keys("new-key", "older-key", "old-key")
    assert secret_of(session, key.access_key_id) == secret
    new_key, new_secret = create_access_key(session, aws_account_id="111122223333")
    assert reencrypt_stored_secrets(session) == 1  # the new key's secret already uses new-key
    assert reencrypt_stored_secrets(session) == 0
    session.commit()

    use_keys("new-key")  # the old key can go once everything is re-encrypted
    assert secret_of(session, key.access_key_id) == secret
    assert secret_of(session, new_key.access_key_id) == new_secret


def test_reencrypt_refuses_a_secret_no_key_decrypts(session: Session, use_keys: UseKeys) -> None:
    use_keys("lost-key")
    create_access_key(session, aws_account_id="111122223333")
    session.commit()
    use_keys("new-key")
    with pytest.raises(SecretDecryptionError, match="no configured key decrypts it"):
        reencrypt_stored_secrets(session)
