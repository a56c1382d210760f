"""The embedded stack's EAGLENEST_SECRET_KEY: random per state directory, kept in a 0600 file.

Every process that reads or writes the stack's database (`eaglenest up`, its api and worker,
`eaglenest keys --state-dir`) encrypts stored secrets with this key, so a copy of the
database alone reveals no secret, unlike the development key in db/settings.py, which is public.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from db.settings import get_settings

SECRET_KEY_FILE_NAME = "secret.key"
SECRET_KEY_ENV = "EAGLENEST_SECRET_KEY"


class SecretKeyFileError(RuntimeError):
    """The state directory's key file exists but holds no key."""


def secret_key_file(state_dir: Path) -> Path:
    return state_dir / SECRET_KEY_FILE_NAME


def load_or_create_secret_key(state_dir: Path) -> str:
    """The state directory's key; a new random one (written 0600, never replaced) the first time."""
    path = secret_key_file(state_dir)
    try:
        # O_EXCL: an existing key is never overwritten, which would orphan every stored secret.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        path.chmod(0o600)  # a copy restored with looser permissions
        key = path.read_text().strip()
        if not key:
            raise SecretKeyFileError(
                f"{path} is empty; restore it from a backup (the stored secrets need it)"
            ) from None
        return key
    key = secrets.token_urlsafe(32)
    with os.fdopen(descriptor, "w") as file:
        file.write(key + "\n")
    return key


@contextmanager
def state_dir_secret_key(state_dir: Path) -> Iterator[str]:
    """Within the block, Settings' secret_key is ``state_dir``'s key; the environment is restored after."""
    previous = os.environ.get(SECRET_KEY_ENV)
    key = load_or_create_secret_key(state_dir)
    os.environ[SECRET_KEY_ENV] = key
    get_settings.cache_clear()
    try:
        yield key
    finally:
        if previous is None:
            os.environ.pop(SECRET_KEY_ENV, None)
        else:
            os.environ[SECRET_KEY_ENV] = previous
        get_settings.cache_clear()
