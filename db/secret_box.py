"""Symmetric encryption of the secret access keys kept in the database.

New secrets are encrypted with EAGLENEST_SECRET_KEY; EAGLENEST_PREVIOUS_SECRET_KEYS still
decrypt what they encrypted, so the key can be rotated without losing any stored secret.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from db.settings import get_settings


class SecretDecryptionError(RuntimeError):
    """A stored secret decrypts with neither EAGLENEST_SECRET_KEY nor a previous key."""


@lru_cache(maxsize=4)
def _fernet(secret_key: str) -> Fernet:
    # Fernet wants 32 url-safe base64 bytes; hashing lets operators use any passphrase.
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret_key.encode()).digest()))


def _current_fernet() -> Fernet:
    return _fernet(get_settings().secret_key.get_secret_value())


def _all_keys() -> MultiFernet:
    """The current key first (MultiFernet encrypts with it), then the previous ones."""
    settings = get_settings()
    previous = [_fernet(key.get_secret_value()) for key in settings.previous_secret_keys]
    return MultiFernet([_current_fernet(), *previous])


def encrypt_secret(plaintext: str) -> str:
    return _current_fernet().encrypt(plaintext.encode()).decode("ascii")


def decrypt_secret(ciphertext: str) -> str:
    try:
        return _all_keys().decrypt(ciphertext.encode("ascii")).decode()
    except InvalidToken as error:
        raise SecretDecryptionError(
            "a stored secret access key cannot be decrypted: neither EAGLENEST_SECRET_KEY nor any of "
            "EAGLENEST_PREVIOUS_SECRET_KEYS is the key it was encrypted with"
        ) from error


def reencrypt_secret(ciphertext: str) -> str | None:
    """``ciphertext`` encrypted with the current key, or None when it already is.

    Raises SecretDecryptionError when no configured key decrypts it.
    """
    token = ciphertext.encode("ascii")
    try:
        _current_fernet().decrypt(token)
    except InvalidToken:
        pass
    else:
        return None
    try:
        return _all_keys().rotate(token).decode("ascii")
    except InvalidToken as error:
        raise SecretDecryptionError(
            "a stored secret cannot be re-encrypted: no configured key decrypts it"
        ) from error
