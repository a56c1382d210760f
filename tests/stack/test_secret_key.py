"""The embedded stack's per-state-directory secret key and the state directory's permissions."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from cli.main import main
from db.queries.account import get_access_key_credentials
from db.secret_box import SecretDecryptionError
from db.session import create_db_engine, create_session_factory
from db.settings import DEVELOPMENT_SECRET_KEY, get_settings
from migrations.runner import upgrade_to_head
from stack.layout import StateLayout
from stack.secret_key import (
    SecretKeyFileError,
    load_or_create_secret_key,
    secret_key_file,
    state_dir_secret_key,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_each_state_dir_gets_its_own_random_key_readable_by_its_owner_only(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    key = load_or_create_secret_key(first)
    assert len(key) >= 40
    assert key != DEVELOPMENT_SECRET_KEY
    assert load_or_create_secret_key(first) == key, "the key is kept, never replaced"
    assert load_or_create_secret_key(second) != key
    assert mode(secret_key_file(first)) == 0o600


def test_a_loosened_key_file_is_tightened_and_an_empty_one_refused(tmp_path: Path) -> None:
    load_or_create_secret_key(tmp_path)
    secret_key_file(tmp_path).chmod(0o644)
    load_or_create_secret_key(tmp_path)
    assert mode(secret_key_file(tmp_path)) == 0o600
    secret_key_file(tmp_path).write_text("")
    with pytest.raises(SecretKeyFileError, match="is empty"):
        load_or_create_secret_key(tmp_path)


def test_the_state_dir_key_is_used_only_within_its_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EAGLENEST_SECRET_KEY", raising=False)
    get_settings.cache_clear()
    with state_dir_secret_key(tmp_path) as key:
        assert get_settings().secret_key.get_secret_value() == key
    assert "EAGLENEST_SECRET_KEY" not in os.environ
    assert get_settings().secret_key.get_secret_value() == DEVELOPMENT_SECRET_KEY


def test_the_state_dir_is_its_owners_alone_even_when_it_existed(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path / "state")
    layout.root.mkdir(mode=0o755)
    layout.root.chmod(0o755)
    layout.create()
    for directory in (layout.root, layout.logs, layout.s3_root):
        assert mode(directory) == 0o700, directory


def test_keys_created_for_a_state_dir_are_encrypted_with_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EAGLENEST_DATABASE_URL", raising=False)
    monkeypatch.delenv("EAGLENEST_SECRET_KEY", raising=False)
    get_settings.cache_clear()
    layout = StateLayout(tmp_path / "state")
    layout.create()
    upgrade_to_head(layout.database_url)
    command = ["keys", "--state-dir", str(layout.root), "create", "--account-id", "333344445555"]
    assert main([*command, "--access-key-id", "AKIAKEYFILE"]) == 0
    secret = json.loads(capsys.readouterr().out)["AccessKey"]["SecretAccessKey"]

    engine = create_db_engine(layout.database_url)
    try:
        with create_session_factory(engine)() as session:
            with pytest.raises(SecretDecryptionError):  # not the public development key
                get_access_key_credentials(session, access_key_id="AKIAKEYFILE")
            with state_dir_secret_key(layout.root):
                credentials = get_access_key_credentials(session, access_key_id="AKIAKEYFILE")
    finally:
        engine.dispose()
    assert credentials is not None
    assert credentials.secret_access_key == secret
